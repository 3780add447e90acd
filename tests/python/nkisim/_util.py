"""Test helpers: put backends/nkisim on sys.path and activate the simulator."""
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SIM_DIR = os.path.join(REPO, "backends", "nkisim")
if SIM_DIR not in sys.path:
    sys.path.insert(0, SIM_DIR)

import nkisim  # noqa: E402

nkisim.activate()


def marker_line(path, marker):
    """1-based line number of the line in `path` that contains `marker`."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if marker in line and "marker_line" not in line:
                return i
    raise AssertionError("marker %r not found" % marker)


def kernel_loader():
    """The harness's kernel loader spec, for tests that start the simulator's kernel process
    themselves (nkisim takes it as a parameter and never imports the harness)."""
    harness = os.path.join(REPO, "backends", "harness")
    if harness not in sys.path:
        sys.path.insert(0, harness)
    from harnesslib.simchild import loader_spec  # noqa: PLC0415
    return loader_spec(harness)
