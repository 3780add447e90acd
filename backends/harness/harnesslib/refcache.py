"""On-disk cache of reference outputs, keyed by problem source, seed and environment.

References at full shape can take minutes on a CPU without an optimised BLAS; a search evaluates
many candidates against the same problem, so each (problem, seed) reference is computed once.
Only references that took at least MIN_SECONDS are stored. The key covers the problem file's
bytes, the seed, AUTOCOMP_SMALL and the numpy version; a problem whose reference depends on
other files should be edited (or the cache disabled) when those change.

Every entry carries an HMAC-SHA256 of its key and arrays under a key kept in the cache folder
(`.key`, mode 0600, made on first use). Kernel code never sees that folder (it runs in the
sandbox, nkisim/sandbox/confine.py); an entry written or altered by anything without the key fails the
check, is reported on stderr and recomputed.
"""
import hashlib
import hmac
import os
import sys
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


def _mac(secret, key, arrays):
    h = hmac.new(secret, digestmod=hashlib.sha256)
    h.update(key.encode() + b"\0")
    for a in arrays:
        h.update(("%s%s\0" % (a.dtype.str, a.shape)).encode())
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


class RefCache:
    """get/put tuples of arrays; a None directory disables the cache. `rejected` counts
    entries that failed their check in this process."""

    def __init__(self, directory):
        self.directory = directory
        self._secret = None
        self.rejected = 0

    def _path(self, key):
        return os.path.join(self.directory, key + ".npz")

    def _key(self, create):
        """The cache's HMAC key (32 bytes), made on first use; None when unusable."""
        if self._secret is not None:
            return self._secret
        path = os.path.join(self.directory, ".key")
        try:
            with open(path, "rb") as f:
                secret = f.read()
        except FileNotFoundError:
            if not create:
                return None
            secret = os.urandom(32)
            try:
                os.makedirs(self.directory, mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(secret)
            except FileExistsError:
                return self._key(False)
            except OSError:
                return None
        except OSError:
            return None
        if len(secret) != 32:
            return None
        self._secret = secret
        return secret

    def get(self, key):
        if not self.directory:
            return None
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as data:
                n = int(data["count"])
                arrays = tuple(data["out%d" % i] for i in range(n))
                mac = str(data["mac"]) if "mac" in data.files else ""
        except (OSError, KeyError, ValueError, EOFError):
            return None
        secret = self._key(False)
        if secret is None or not hmac.compare_digest(mac, _mac(secret, key, arrays)):
            self.rejected += 1
            sys.stderr.write("reference cache: entry %s failed its integrity check; the "
                             "reference is recomputed\n" % os.path.basename(path))
            return None
        return arrays

    def put(self, key, arrays, seconds):
        if not self.directory or seconds < MIN_SECONDS:
            return False
        if sum(a.nbytes for a in arrays) > MAX_BYTES:
            return False
        secret = self._key(True)
        if secret is None:
            return False
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, count=np.array(len(arrays)), mac=np.array(_mac(secret, key, arrays)),
                         **{"out%d" % i: a for i, a in enumerate(arrays)})
            os.replace(tmp, self._path(key))
            return True
        except OSError:
            return False
