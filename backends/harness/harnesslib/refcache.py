"""On-disk cache of reference outputs, keyed by problem source, seed and environment.

References at full shape can take minutes on a CPU without an optimised BLAS; a search evaluates
many candidates against the same problem, so each (problem, seed) reference is computed once.
Only references that took at least MIN_SECONDS are stored. The key covers the problem file's
bytes, the seed, AUTOCOMP_SMALL and the numpy version; a problem whose reference depends on
other files should be edited (or the cache disabled) when those change.
"""
import hashlib
import os
import tempfile

import numpy as np

MIN_SECONDS = 1.0
MAX_BYTES = 2 << 30


def default_dir():
    env = os.environ.get("AUTOCOMP_REF_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autocomp-mcp", "harness-refs")


def cache_key(problem_sha256, seed):
    h = hashlib.sha256()
    for part in (problem_sha256, str(seed), os.environ.get("AUTOCOMP_SMALL", ""), np.__version__):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class RefCache:
    """get/put tuples of arrays; a None directory disables the cache."""

    def __init__(self, directory):
        self.directory = directory

    def _path(self, key):
        return os.path.join(self.directory, key + ".npz")

    def get(self, key):
        if not self.directory:
            return None
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as data:
                n = int(data["count"])
                return tuple(data["out%d" % i] for i in range(n))
        except (OSError, KeyError, ValueError):
            return None

    def put(self, key, arrays, seconds):
        if not self.directory or seconds < MIN_SECONDS:
            return False
        if sum(a.nbytes for a in arrays) > MAX_BYTES:
            return False
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, count=np.array(len(arrays)),
                         **{"out%d" % i: a for i, a in enumerate(arrays)})
            os.replace(tmp, self._path(key))
            return True
        except OSError:
            return False
