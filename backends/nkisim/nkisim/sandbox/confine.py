"""The OS sandbox kernel code runs in: a bubblewrap (`bwrap`) command line and a seccomp filter.

Standard library only, no other nkisim import: the harness uses it for every device.

`command(argv, visible=..., writable=..., devices=..., fds=...)` returns the argv that runs
`argv` confined:
  * its own user, mount, PID, network, IPC, UTS and cgroup namespaces; uid/gid 65534 inside;
    no capabilities; a new session; killed when the process that started it dies;
  * a file system of its own: a private tmpfs root holding read-only binds of the
    interpreter's system folders (/usr, /lib*, /bin, the Python prefixes, the folder numpy
    lives in, the few /etc files the dynamic loader reads), the `visible` paths read-only,
    the `writable` paths read-write, a fresh /proc showing only the sandbox's processes, a
    minimal /dev, a private tmpfs /tmp. The home folder, the rest of /etc (/etc/shadow), the
    problem file, the reference cache, the store and the harness's result channel are not in
    it;
  * a seccomp filter (compiled with libseccomp) that refuses to create processes: fork,
    vfork and clone without CLONE_THREAD fail with EPERM (threads still work), clone3 fails
    with ENOSYS so the C library falls back to clone.
Resource limits are set by the confined program itself before it runs any kernel code
(`apply_limits`); the limits travel in the environment (`limits_env`).

A host without bwrap or libseccomp gets `Unavailable` naming the Debian package, never an
unconfined run. `AUTOCOMP_BWRAP` names the bwrap binary (a test seam; default: PATH).
"""
import ctypes
import ctypes.util
import os
import shutil
import sys

PACKAGE = "bubblewrap"
SECCOMP_PACKAGE = "libseccomp2"
UID = 65534  # "nobody": a non-root identity inside the sandbox

# Limits (overridable by the environment of the process that starts the sandbox).
MEMORY_MB = int(os.environ.get("AUTOCOMP_SANDBOX_MEMORY_MB", "8192"))
FILE_MB = int(os.environ.get("AUTOCOMP_SANDBOX_FILE_MB", "256"))
NPROC = 64  # threads count here too


class Unavailable(Exception):
    """The sandbox cannot be built on this host (the message says why and what to install)."""


def bwrap_path():
    configured = os.environ.get("AUTOCOMP_BWRAP")
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        raise Unavailable("the kernel sandbox needs bubblewrap: AUTOCOMP_BWRAP=%s is not an "
                          "executable file (install the Debian package '%s')"
                          % (configured, PACKAGE))
    found = shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if not found:
        raise Unavailable("the kernel sandbox needs bubblewrap: 'bwrap' is not on PATH (install "
                          "the Debian package '%s': apt-get install %s)" % (PACKAGE, PACKAGE))
    return found


# ---- seccomp ------------------------------------------------------------------------------

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7
_CLONE_THREAD = 0x00010000
_EPERM = 1
_ENOSYS = 38


def _errno_action(err):
    return 0x00050000 | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


_FILTER = None


def seccomp_filter():
    """The compiled BPF program (bytes), built once per process with libseccomp."""
    global _FILTER
    if _FILTER is not None:
        return _FILTER
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise Unavailable("the kernel sandbox needs libseccomp (install the Debian package "
                          "'%s')" % SECCOMP_PACKAGE)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise Unavailable("libseccomp could not start a filter")
    try:
        def rule(action, syscall, *cmps):
            nr = lib.seccomp_syscall_resolve_name(syscall.encode())
            if nr < 0:
                return  # not a syscall on this architecture
            arr = (_ArgCmp * max(1, len(cmps)))(*cmps)
            if lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr) != 0:
                raise Unavailable("libseccomp refused the rule for %s" % syscall)

        rule(_errno_action(_EPERM), "fork")
        rule(_errno_action(_EPERM), "vfork")
        rule(_errno_action(_EPERM), "clone", _ArgCmp(0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0))
        rule(_errno_action(_ENOSYS), "clone3")
        r, w = os.pipe()
        try:
            if lib.seccomp_export_bpf(ctx, w) != 0:
                raise Unavailable("libseccomp could not export the filter")
            os.close(w)
            w = None
            chunks = []
            while True:
                b = os.read(r, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(r)
            if w is not None:
                os.close(w)
    finally:
        lib.seccomp_release(ctx)
    _FILTER = b"".join(chunks)
    return _FILTER


def filter_fd():
    """A readable descriptor holding the filter (bwrap --seccomp reads it); caller closes."""
    data = seccomp_filter()
    fd = os.memfd_create("autocomp-seccomp", 0) if hasattr(os, "memfd_create") else None
    if fd is None:
        raise Unavailable("the kernel sandbox needs memfd_create (Linux >= 3.17)")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# ---- the bwrap command line ---------------------------------------------------------------

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
        "/etc/localtime")


def _python_paths():
    """Folders the interpreter and numpy are loaded from when they are outside /usr."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    try:
        import numpy  # noqa: PLC0415
        paths.add(os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__))))
    except ImportError:
        pass
    return sorted(p for p in paths if p and p != "/" and os.path.isdir(p))


def _covered(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def command(argv, visible=(), writable=(), devices=(), fds=(), seccomp_fd=None, chdir="/tmp"):
    """The bwrap argv running `argv` in the sandbox described in the module docstring.

    visible: files or folders bound read-only at the same path; writable: bound read-write;
    devices: device nodes bound in (the Neuron runtime's /dev/neuron*); fds: descriptors the
    program receives (they must be inheritable); seccomp_fd: from `filter_fd()`."""
    cmd = [bwrap_path(), "--unshare-all", "--unshare-user", "--uid", str(UID), "--gid", str(UID),
           "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    bound = []
    for path in _SYSTEM:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            cmd += ["--ro-bind", path, path]
            bound.append(path)
    for path in _ETC:
        if os.path.lexists(path):
            cmd += ["--ro-bind", path, path]
    # /tmp first: a bind below it (a kernel file in /tmp) must land on the private tmpfs
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in _python_paths():
        if not _covered(path, bound):
            cmd += ["--ro-bind", path, path]
            bound.append(path)
    for path in visible:
        cmd += ["--ro-bind", path, path]
    for path in writable:
        cmd += ["--bind", path, path]
    for path in devices:
        cmd += ["--dev-bind", path, path]
    if seccomp_fd is not None:
        cmd += ["--seccomp", str(seccomp_fd)]
    cmd += ["--chdir", chdir, "--"]
    del fds  # inherited as they are: bwrap passes on every descriptor it did not open itself
    return cmd + list(argv)


MAX_LOCAL_MODULES = 64


def _module_file(folder, part):
    """(path of module `part` in `folder` or None, folder below it or None)."""
    if not part or not os.path.isdir(folder):
        return None, None
    path = os.path.join(folder, part + ".py")
    if os.path.isfile(path):
        return path, None
    package = os.path.join(folder, part)
    if os.path.isdir(package):
        init = os.path.join(package, "__init__.py")
        return (init if os.path.isfile(init) else None), package
    return None, None


MAX_PACKAGE_LEVELS = 4


def relative_levels(path):
    """How many folders the kernel's package spans upwards: the deepest package-relative
    import (`from ..util import f`: 2) of the kernel file and, transitively, of the package
    modules those imports reach (a helper's own `from ...core import x` widens it); 0 if the
    file has none. At most MAX_PACKAGE_LEVELS."""
    import ast  # noqa: PLC0415
    kernel = os.path.realpath(path)
    here = os.path.dirname(kernel)
    todo, seen, top = [kernel], {kernel}, 0
    while todo and len(seen) <= 4 * MAX_LOCAL_MODULES:
        cur = todo.pop()
        try:
            with open(cur, encoding="utf-8", errors="replace") as f:
                tree = ast.parse(f.read(), cur)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = os.path.dirname(cur)
            for _ in range(node.level - 1):
                base = os.path.dirname(base)
            up, at = 1, here
            while at != base and at.startswith(base + os.sep) and up <= MAX_PACKAGE_LEVELS:
                at, up = os.path.dirname(at), up + 1
            if at != base or up > MAX_PACKAGE_LEVELS:
                continue  # outside what the kernel's package may span
            top = max(top, up)
            parts = (node.module or "").split(".") if node.module else []
            stem = os.path.join(base, *parts)
            cands = [stem + ".py", os.path.join(stem, "__init__.py")] + [
                os.path.join(stem, a.name + ".py") for a in node.names]
            for c in cands:
                c = os.path.realpath(c)
                if c not in seen and os.path.isfile(c):
                    seen.add(c)
                    todo.append(c)
    return top


def package_root(kernel_path):
    """The folder the kernel's modules may come from: its own folder, or the ancestor its
    package-relative imports reach, transitively (`from ..util import f`: the parent), at
    most MAX_PACKAGE_LEVELS - 1 up."""
    root = os.path.dirname(os.path.realpath(kernel_path))
    for _ in range(min(relative_levels(kernel_path), MAX_PACKAGE_LEVELS) - 1):
        root = os.path.dirname(root)
    return root


def local_modules(kernel_path, exclude=()):
    """The `.py` files of the kernel's package (`package_root`: its folder, or the ancestor its
    package-relative imports reach) that the kernel imports, transitively (`import m`,
    `from m import x`, `from .m import x`, `from ..util import x`, `from . import m`, packages'
    __init__.py): what the sandbox shows it besides the kernel file. Never a path in `exclude`
    (the problem file) nor a file outside that folder; at most MAX_LOCAL_MODULES. Sorted
    absolute real paths."""
    import ast  # noqa: PLC0415
    kernel = os.path.realpath(kernel_path)
    home = os.path.dirname(kernel)
    root = package_root(kernel)
    skip = {os.path.realpath(p) for p in exclude if p} | {kernel}
    found = []
    todo = [kernel]

    def add(path):
        if path is None:
            return
        real = os.path.realpath(path)
        if real in skip or not real.startswith(root + os.sep) or len(found) >= MAX_LOCAL_MODULES:
            return
        skip.add(real)
        found.append(real)
        todo.append(real)

    def walk(base, dotted):
        """Resolve `dotted` from folder `base`; the folder reached (a package) or None."""
        at = base
        for part in dotted.split(".") if dotted else ():
            path, below = _module_file(at, part)
            if path is None and below is None:
                return None
            add(path)
            if below is None:
                return None
            at = below
        return at

    while todo:
        path = todo.pop()
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                tree = ast.parse(f.read(), path)
        except (OSError, SyntaxError, ValueError):
            continue
        here = os.path.dirname(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    walk(home, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here
                    for _ in range(node.level - 1):
                        base = os.path.dirname(base)
                    if base != root and not base.startswith(root + os.sep):
                        continue
                else:
                    base = home  # absolute imports: the kernel's folder is on sys.path
                at = walk(base, node.module or "") if node.module else base
                if at is not None:
                    for alias in node.names:
                        sub_path, below = _module_file(at, alias.name)
                        add(sub_path)
    return sorted(found)


def limits_env(cpu_seconds, memory_mb=None, file_mb=None, nproc=NPROC):
    """Environment entries `apply_limits` reads in the confined program (0: no limit)."""
    return {"AUTOCOMP_LIMIT_CPU": str(int(cpu_seconds)),
            "AUTOCOMP_LIMIT_AS_MB": str(int(memory_mb if memory_mb is not None else MEMORY_MB)),
            "AUTOCOMP_LIMIT_FSIZE_MB": str(int(file_mb if file_mb is not None else FILE_MB)),
            "AUTOCOMP_LIMIT_NPROC": str(int(nproc))}


def apply_limits(environ=None):
    """Set hard and soft limits from `limits_env` (called by the confined program before any
    kernel code; hard limits cannot be raised again without privileges it does not have)."""
    import resource  # noqa: PLC0415
    env = os.environ if environ is None else environ

    def setl(res, value):
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass

    cpu = int(env.pop("AUTOCOMP_LIMIT_CPU", "0") or 0)
    if cpu > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    mem = int(env.pop("AUTOCOMP_LIMIT_AS_MB", "0") or 0)
    if mem > 0:
        setl(resource.RLIMIT_AS, mem << 20)
    fsize = int(env.pop("AUTOCOMP_LIMIT_FSIZE_MB", "0") or 0)
    if fsize > 0:
        setl(resource.RLIMIT_FSIZE, fsize << 20)
    setl(resource.RLIMIT_CORE, 0)
    nproc = int(env.pop("AUTOCOMP_LIMIT_NPROC", str(NPROC)) or 0)
    if nproc > 0:
        setl(resource.RLIMIT_NPROC, nproc)


def startup_problem(log_text):
    """A message for bwrap's own failure (it writes 'bwrap: ...' before running anything), or
    None when the log shows no such failure."""
    for line in (log_text or "").splitlines():
        if line.startswith("bwrap: "):
            hint = ""
            low = line.lower()
            if "namespace" in low or "permission" in low or "operation not permitted" in low:
                hint = (" (this host does not let bubblewrap create user namespaces: enable "
                        "unprivileged user namespaces, e.g. sysctl kernel.unprivileged_userns_"
                        "clone=1 or user.max_user_namespaces > 0, or run where they are allowed)")
            return "the kernel sandbox could not start: %s%s" % (line[len("bwrap: "):], hint)
    return None
