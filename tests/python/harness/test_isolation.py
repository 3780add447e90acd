"""Kernel code runs in the OS sandbox (nkisim/confine.py): hostile kernels that pass the static
scan are refused or harmless.

Every attack fixture (fixtures/isolation/) reaches ctypes through numpy, which the static scan
lets through, prints ATTACK-RAN (so each test proves the attack was executed, not refused by
the scan), attacks, then computes `2 * a` honestly. Each test runs the harness as the product
does (`python3 -I -B autocomp_harness.py verify`) and asserts what a user would notice: the
result is a failure or correct, no planted file exists outside the sandbox, nothing was
deleted, no process is left over, no connection was made.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from tests.python.harness import util

FIX = os.path.join(util.FIXTURES, "isolation")


def processes_naming(text):
    """Processes whose command line contains `text` (a test's own temporary folder: the
    sandbox's bwrap processes name the kernel file they bind)."""
    pids = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if text.encode() in f.read():
                    pids.add(int(pid))
        except OSError:
            pass
    return pids


def run_harness(kernel, problem, *extra, env=None, timeout=300):
    """(result dict, stderr, exit code) of `python3 -I -B autocomp_harness.py verify ...`."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    full_env.update(env or {})
    p = subprocess.run([sys.executable, "-I", "-B", util.HARNESS, "verify", "--kernel", kernel,
                        "--problem", problem, "--no-ref-cache"] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       env=full_env, check=False)
    lines = p.stdout.decode().splitlines()
    import json  # noqa: PLC0415
    return (json.loads(lines[-1]) if lines else None), p.stderr.decode(), p.returncode, \
        p.stdout.decode()


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class HostileKernels(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stage(self, fixture, problem="problem_double.py", **subst):
        """Copy the fixture (placeholders filled in) and the problem into one folder, as the
        product lays out a work folder: (kernel path, problem path)."""
        with open(os.path.join(FIX, fixture)) as f:
            text = f.read()
        for key, value in subst.items():
            text = text.replace("@%s@" % key, str(value))
        kernel = os.path.join(self.tmp, "kernel.py")
        with open(kernel, "w") as f:
            f.write(text)
        dst = os.path.join(self.tmp, "problem.py")
        shutil.copy(os.path.join(FIX, problem), dst)
        return kernel, dst

    def attack(self, fixture, honest=True, **subst):
        """Run an attack; honest: its kernel is then judged as the honest kernel it also is."""
        kernel, problem = self.stage(fixture, **subst)
        out, err, code, stdout = run_harness(kernel, problem)
        self.assertEqual(code, 0, err[-2000:])
        self.assertIn("ATTACK-RAN", err, "the attack did not run (refused by the scan?): %s"
                      % (out or {}).get("failure"))
        self.assertIsNotNone(out)
        if honest:
            self.assertEqual(out["status"], "ok", out.get("failure"))
            self.assertTrue(out["verify"]["correct"])
        self.assertEqual(processes_naming(self.tmp), set(), "processes left over")
        return out, err, stdout

    def test_forged_result_through_proc_fd_and_killing_the_parent(self):
        out, err, stdout = self.attack("result_pipe.py", honest=False)
        # the only descriptors it reaches are its own sandbox's: its own answer channel, which
        # it garbles (a failure), never the harness's result pipe
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["message"], "the kernel process wrote no valid answer")
        self.assertNotIn("FORGED", stdout)
        self.assertEqual(out["schema"], "autocomp-harness/1")
        self.assertEqual(len(stdout.strip().splitlines()), 1)

    def test_planting_a_reference_cache_entry(self):
        target = os.path.join(self.tmp, "refs", "0123456789abcdef0123456789abcdef.npz")
        os.makedirs(os.path.dirname(target))
        _, err, _ = self.attack("refcache.py", TARGET=target)
        self.assertFalse(os.path.exists(target))
        self.assertIn("PLANT=2", err)  # ENOENT: the cache folder does not exist in the sandbox

    def test_planting_bytecode_in_the_harness_pycache(self):
        target = os.path.join(util.HARNESS_DIR, "harnesslib", "__pycache__",
                              "planted.cpython-%d%d.pyc" % sys.version_info[:2])
        folder = os.path.dirname(target)
        if not os.path.isdir(folder):  # the harness runs with -B: make the folder an attack needs
            os.makedirs(folder)
            self.addCleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        self.addCleanup(lambda: os.path.exists(target) and os.unlink(target))
        _, err, _ = self.attack("pycache.py", TARGET=target)
        self.assertFalse(os.path.exists(target))
        self.assertNotIn("PLANT=0", err)

    def test_planting_a_pth_file_in_a_user_site(self):
        site = os.path.join(self.tmp, ".local", "lib", "python3", "site-packages")
        os.makedirs(site)
        target = os.path.join(site, "planted.pth")
        _, err, _ = self.attack("user_site.py", TARGET=target)
        self.assertFalse(os.path.exists(target))
        self.assertNotIn("PLANT=0", err)

    def test_writing_the_store_found_on_an_ancestors_command_line(self):
        store = os.path.join(self.tmp, "store.db")
        guessed = os.path.join(util.REPO, "build", "autocomp-store-guess.db")
        with open(store, "wb") as f:
            f.write(b"original store bytes")
        kernel, problem = self.stage("store.py", TARGET=guessed)
        # an ancestor carrying --db on its command line, as the server does
        sh = subprocess.run(["/bin/sh", "-c", '"$0" -I -B "$1" verify --kernel "$2" --problem "$3" '
                             '--no-ref-cache; true', sys.executable, util.HARNESS, kernel, problem,
                             "--db", store], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PATH": "/usr/bin:/bin"}, timeout=300, check=False)
        err = sh.stderr.decode()
        self.assertIn("ATTACK-RAN", err)
        self.assertIn('"status":"ok"', sh.stdout.decode())
        with open(store, "rb") as f:
            self.assertEqual(f.read(), b"original store bytes")
        self.assertFalse(os.path.exists(guessed))
        # no ancestor's command line is visible: only the guessed path was tried, and failed
        self.assertIn("STORES=[%r]" % guessed, err)
        self.assertNotIn("PLANT=0", err)

    def test_reading_the_problem_file_beside_the_kernel(self):
        _, err, _ = self.attack("problem_import.py")
        self.assertNotIn("PROBLEM-READ", err)
        self.assertIn("PROBLEM-ERRNO=2", err)

    def test_reading_etc_shadow(self):
        _, err, _ = self.attack("shadow.py")
        self.assertNotIn("SHADOW-READ", err)
        self.assertIn("SHADOW-ERRNO=2", err)

    def test_reserving_50_gib(self):
        _, err, _ = self.attack("memory.py")
        got = [int(line.split("=")[1]) for line in err.splitlines()
               if line.startswith("ALLOCATED-GIB=")]
        self.assertEqual(len(got), 1, err[-2000:])
        self.assertLess(got[0], 9)  # the address-space limit (8 GiB) stops it

    def test_deleting_files_outside_its_folder(self):
        victim = os.path.join(self.tmp, "victim.txt")
        with open(victim, "w") as f:
            f.write("keep me")
        kernel, problem = self.stage("delete.py", VICTIM=victim)
        out, err, code, _ = run_harness(kernel, problem)
        self.assertIn("ATTACK-RAN", err)
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertTrue(os.path.exists(victim))
        self.assertTrue(os.path.exists(problem))

    def test_fork_bomb(self):
        _, err, _ = self.attack("forkbomb.py")
        self.assertIn("FORKS=0", err)

    def test_network_socket_to_the_host_loopback(self):
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.setblocking(False)
        self.addCleanup(server.close)
        _, err, _ = self.attack("network.py", PORT=server.getsockname()[1])
        with self.assertRaises(BlockingIOError):
            server.accept()
        self.assertNotIn("CONNECT=0", err)


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class AnswersWithoutInputs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stage(self, fixture, problem, **subst):
        with open(os.path.join(FIX, fixture)) as f:
            text = f.read()
        for key, value in subst.items():
            text = text.replace("@%s@" % key, str(value))
        kernel = os.path.join(self.tmp, "kernel.py")
        with open(kernel, "w") as f:
            f.write(text)
        return kernel, os.path.join(FIX, problem)

    def constants_kernel(self):
        a = np.random.default_rng(0).standard_normal((1, 8), dtype=np.float32)
        values = "[%s]" % ", ".join(repr(float(v)) for v in (a * np.float32(2.0))[0])
        return self.stage("constants.py", "problem_small.py", VALUES=values)

    def test_constants_for_the_published_seeds_fail_on_drawn_seeds(self):
        out, _, _, _ = run_harness(*self.constants_kernel())
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "mismatch")
        self.assertIn("input_seeds", out["receipt"])
        self.assertIn("seed_secret", out["receipt"])

    def test_constants_that_match_are_refused_for_never_reading_the_input(self):
        out, _, _, _ = run_harness(*self.constants_kernel(), "--fixed-seeds")
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "forbidden_access")
        self.assertIn("never", out["failure"]["message"].replace("no instruction", "never"))
        self.assertIn("'a'", out["failure"]["message"])

    def test_a_kernel_reading_only_a_copy_of_the_input_is_refused(self):
        out, _, _, _ = run_harness(*self.stage("reads_copy_only.py", "problem_copy.py"))
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "forbidden_access")
        self.assertIn("'a'", out["failure"]["message"])

    def test_ignoring_an_input_the_reference_ignores_passes(self):
        out, _, _, _ = run_harness(*self.stage("honest_ignores_b.py", "problem_copy.py"))
        self.assertEqual(out["status"], "ok", out.get("failure"))

    def test_ignoring_an_input_the_problem_always_gives_one_value_passes(self):
        # the reference multiplies by b, but the problem only ever makes b all ones: values it
        # never produces are not tried, so relying on its guarantee is not refused
        out, _, _, _ = run_harness(*self.stage("honest_fixed_mask.py", "problem_mask.py"))
        self.assertEqual(out["status"], "ok", out.get("failure"))

    def test_drawn_seeds_are_reproducible_from_the_receipt(self):
        kernel, problem = self.stage("honest_ignores_b.py", "problem_copy.py")
        first, _, _, _ = run_harness(kernel, problem)
        again, _, _, _ = run_harness(kernel, problem, "--seed-secret",
                                     first["receipt"]["seed_secret"])
        self.assertEqual(first["receipt"]["input_seeds"], again["receipt"]["input_seeds"])
        self.assertEqual([s["max_abs_err"] for s in first["verify"]["seeds"]],
                         [s["max_abs_err"] for s in again["verify"]["seeds"]])
        other, _, _, _ = run_harness(kernel, problem)
        self.assertNotEqual(first["receipt"]["input_seeds"], other["receipt"]["input_seeds"])


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class SandboxTool(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-test-")
        self.kernel = os.path.join(self.tmp, "kernel.py")
        shutil.copy(os.path.join(FIX, "honest_ignores_b.py"), self.kernel)
        self.problem = os.path.join(FIX, "problem_copy.py")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_a_host_without_bwrap_gets_a_clear_failure_never_an_unsandboxed_run(self):
        out, _, code, _ = run_harness(self.kernel, self.problem,
                                      env={"AUTOCOMP_BWRAP": os.path.join(self.tmp, "no-bwrap")})
        self.assertEqual(code, 0)
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "unavailable")
        self.assertIn("bubblewrap", out["failure"]["message"])
        self.assertNotIn("verify", out)  # nothing was run

    def test_a_bwrap_that_cannot_create_namespaces_is_reported_as_such(self):
        fake = os.path.join(self.tmp, "bwrap")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely "
                    "because the kernel does not allow non-privileged user namespaces.' >&2\n"
                    "exit 1\n")
        os.chmod(fake, 0o755)
        out, _, _, _ = run_harness(self.kernel, self.problem, env={"AUTOCOMP_BWRAP": fake})
        self.assertEqual(out["status"], "failed")
        self.assertEqual(out["failure"]["kind"], "unavailable")
        self.assertIn("could not start", out["failure"]["message"])
        self.assertIn("user namespaces", out["failure"]["message"])


class ReferenceCache(unittest.TestCase):
    """Cached references are signed with a key the kernel never sees; a planted or altered
    entry is refused and the reference recomputed."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-refs-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_entries_round_trip_and_the_key_is_private(self):
        from harnesslib.refcache import RefCache  # noqa: PLC0415
        cache = RefCache(self.tmp)
        ref = (np.arange(6, dtype=np.float32).reshape(2, 3),)
        self.assertTrue(cache.put("k1", ref, 5.0))
        got = RefCache(self.tmp).get("k1")
        np.testing.assert_array_equal(got[0], ref[0])
        self.assertEqual(os.stat(os.path.join(self.tmp, ".key")).st_mode & 0o777, 0o600)

    def test_altered_or_planted_entries_are_refused(self):
        from harnesslib.refcache import RefCache  # noqa: PLC0415
        cache = RefCache(self.tmp)
        cache.put("k1", (np.ones((2, 3), np.float32),), 5.0)
        path = os.path.join(self.tmp, "k1.npz")
        with np.load(path) as data:
            fields = {k: data[k] for k in data.files}
        fields["out0"] = fields["out0"] * 0  # same MAC, other values
        np.savez(path, **fields)
        planted = os.path.join(self.tmp, "k2.npz")
        np.savez(planted, count=np.array(1), out0=np.zeros((2, 3), np.float32))
        fresh = RefCache(self.tmp)
        self.assertIsNone(fresh.get("k1"))
        self.assertIsNone(fresh.get("k2"))
        self.assertEqual(fresh.rejected, 2)

    @unittest.skipUnless(util.sim_available(), "nkisim not importable")
    def test_the_harness_recomputes_a_planted_reference(self):
        from harnesslib import refcache  # noqa: PLC0415
        from harnesslib.problem import load_problem  # noqa: PLC0415
        kernel = os.path.join(self.tmp, "kernel.py")
        shutil.copy(os.path.join(FIX, "honest_ignores_b.py"), kernel)
        problem_path = os.path.join(FIX, "problem_copy.py")
        problem = load_problem(problem_path)
        cache_dir = os.path.join(self.tmp, "refs")
        os.makedirs(cache_dir)
        refcache.RefCache(cache_dir)._key(True)  # the folder has its key
        for seed in (0, 1):  # wrong answers, written by something without the key
            np.savez(os.path.join(cache_dir, refcache.cache_key(problem.source_sha256, seed)
                                  + ".npz"), count=np.array(1),
                     out0=np.zeros((128, 64), np.float32), mac=np.array("0" * 64))
        out = util.autocomp_harness.run(["verify", "--kernel", kernel, "--problem", problem_path,
                                         "--fixed-seeds", "--ref-cache", cache_dir])
        self.assertEqual(out["status"], "ok", out.get("failure"))


FAKE_SDK = '''"""A fake Neuron SDK for tests: nki.jit runs the kernel as plain Python."""


def jit(fn):
    return fn
'''


@unittest.skipUnless(util.sim_available(), "nkisim not importable")
class NeuronDeviceChild(unittest.TestCase):
    """Device `neuron` (with a fake SDK, named as such): the SDK runs the kernel only in the
    sandboxed child; the harness process never imports it."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-neuron-")
        sdk = os.path.join(self.tmp, "sdk")
        os.makedirs(os.path.join(sdk, "nki"))
        with open(os.path.join(sdk, "nki", "__init__.py"), "w") as f:
            f.write(FAKE_SDK)
        # another test's stand-in `nki` module must not hide this one
        saved = {n: m for n, m in sys.modules.items() if n == "nki" or n.startswith("nki.")}
        for name in saved:
            del sys.modules[name]
        sys.path.insert(0, sdk)
        import importlib  # noqa: PLC0415
        importlib.invalidate_caches()
        self.addCleanup(sys.modules.update, saved)
        self.addCleanup(sys.path.remove, sdk)
        self.addCleanup(sys.modules.pop, "nki", None)
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work)
        self.kernel = os.path.join(self.work, "kernel.py")
        shutil.copy(os.path.join(FIX, "neuron_fake_sdk_kernel.py"), self.kernel)
        self.problem = os.path.join(self.work, "problem.py")
        shutil.copy(os.path.join(FIX, "problem_double.py"), self.problem)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_kernel_runs_confined_and_is_judged_as_it_is(self):
        import contextlib  # noqa: PLC0415
        import io  # noqa: PLC0415
        from harnesslib import neuron_sandbox  # noqa: PLC0415
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            out = util.autocomp_harness.run(["verify", "--device", "neuron", "--kernel",
                                             self.kernel, "--problem", self.problem,
                                             "--workdir", self.work, "--no-ref-cache"])
        text = err.getvalue()
        self.assertEqual(out["status"], "ok", out.get("failure"))
        self.assertIn("ATTACK-RAN", text)
        self.assertIn("OPEN /etc/shadow=2", text)
        self.assertIn("OPEN %s=2" % self.problem, text)
        self.assertNotIn("autocomp_kernel", sys.modules)  # never imported here
        self.assertIsNotNone(neuron_sandbox)


def product_binary():
    """The autocomp-mcp binary: $AUTOCOMP_MCP_BINARY, else this checkout's build/."""
    path = os.environ.get("AUTOCOMP_MCP_BINARY") or os.path.join(util.REPO, "build",
                                                                  "autocomp-mcp")
    return path if os.access(path, os.X_OK) else None


@unittest.skipUnless(util.sim_available() and product_binary(), "no autocomp-mcp build")
class ThroughTheProduct(unittest.TestCase):
    """`autocomp-mcp call verify_kernel`: the server's store and the harness's result pipe are
    out of the kernel's reach, and the tool answers."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="isolation-product-")
        self.db = os.path.join(self.tmp, "store.db")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def verify(self, fixture, **subst):
        with open(os.path.join(FIX, fixture)) as f:
            text = f.read()
        for key, value in subst.items():
            text = text.replace("@%s@" % key, str(value))
        kernel = os.path.join(self.tmp, "kernel.py")
        with open(kernel, "w") as f:
            f.write(text)
        problem = os.path.join(self.tmp, "problem.py")
        shutil.copy(os.path.join(FIX, "problem_double.py"), problem)
        import json  # noqa: PLC0415
        p = subprocess.run([product_binary(), "call", "verify_kernel", "--harness-dir",
                            os.path.join(util.REPO, "backends"), "--db", self.db, "--args",
                            json.dumps({"kernel": kernel, "problem": problem, "fresh": True})],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
                           check=False)
        return p.stdout.decode(), p.stderr.decode()

    def evaluations(self):
        import sqlite3  # noqa: PLC0415
        with sqlite3.connect(self.db) as db:
            self.assertEqual(db.execute("PRAGMA integrity_check").fetchone()[0], "ok")
            return db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]

    def test_forged_result_and_killed_harness(self):
        out, err = self.verify("result_pipe.py")
        self.assertNotIn("FORGED", out)
        self.assertIn('"correct": false', out, err[-2000:])
        self.assertEqual(processes_naming(self.tmp), set())

    def test_store_named_on_the_servers_command_line(self):
        out, err = self.verify("store.py", TARGET=self.db)
        self.assertIn('"correct": true', out, err[-2000:])  # harmless: judged as it is
        self.assertEqual(self.evaluations(), 1)
        self.assertEqual(processes_naming(self.tmp), set())


if __name__ == "__main__":
    unittest.main()
