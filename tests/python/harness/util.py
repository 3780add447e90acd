"""Shared helpers for the harness tests: paths, temp files, running the harness."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HARNESS_DIR = os.path.join(REPO, "backends", "harness")
HARNESS = os.path.join(HARNESS_DIR, "autocomp_harness.py")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
SEEDS_DIR = os.path.join(REPO, "seeds")

if HARNESS_DIR not in sys.path:
    sys.path.insert(0, HARNESS_DIR)

import autocomp_harness  # noqa: E402


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip("\n"))
    return path


def run_cli(args, timeout=300, env=None):
    """Run the harness as a child process; returns (stdout lines, stderr, exit code)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run([sys.executable, HARNESS] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, env=full_env, check=False)
    return p.stdout.decode().splitlines(), p.stderr.decode(), p.returncode


def last_json(lines):
    return json.loads(lines[-1])


def sim_available():
    from harnesslib import simdev
    return simdev.nkisim_version() is not None


class TempDir:
    def __enter__(self):
        self._td = tempfile.TemporaryDirectory(prefix="harness-test-")
        return self._td.name

    def __exit__(self, *exc):
        self._td.cleanup()
