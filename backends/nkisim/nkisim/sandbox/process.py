"""The kernel's own process: record a kernel's trace in a child, hand back only the trace.

Parent side: `KernelProcess(config)` starts `python -I -B process.py` inside the OS sandbox
(confine.py: bubblewrap with its own mount, PID, network, user and IPC namespaces, a file
system holding only the interpreter, the simulator, the caller's kernel loader and the kernel
file, no capabilities, no new processes, resource limits) with a minimal environment, stdin
from /dev/null, stdout and stderr to a scratch file (never the caller's streams), one
dedicated pipe for its answers and one for the request. `loaded()` waits for the import and
kernel selection; `record(request)` sends the input specs and waits for the
trace (bounded time and size). Answers are JSON (no pickle anywhere). A child that dies,
hangs, writes no answer or garbage gives a failure answer, never a trace.

Child side (this file run as a script): `record.load(config)`, answer; read the request,
`record.trace(...)`, answer; exit.

config: kernel_path, loader, target, input_names, kernel_name, problem_kernel.
request: inputs (name -> {"shape", "dtype"} or {"value": encoded}), input_dtypes, grid.
"""
import json
import os
import select
import sys
import time

_DUMPS = json.dumps  # bound before any kernel code runs in this process
NKISIM_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD_TIMEOUT_S = float(os.environ.get("NKISIM_SANDBOX_TIMEOUT", "600"))
# The largest answer (a trace) read from the kernel's process. The largest NKIBench trace
# (gqa_full) is 94 MiB, the shipped GEMM seed's 27 MiB; a kernel whose trace is larger than this is refused
# (runtime_error) rather than held in memory.
MAX_ANSWER_BYTES = 192 << 20


def _failure(kind, message, line=None):
    return {"ok": False, "kind": kind, "message": message, "line": line}


class KernelProcess:
    """One child: it imports and selects the kernel at start, then records one trace.

    Messages are single JSON lines: child -> parent on the answer pipe (first the load
    answer, then the trace answer), parent -> child on the command pipe (the input specs)."""

    def __init__(self, config=None, timeout=None, kernel_path=None, loader=None,
                 hidden=()):
        """Start the child; with config None it only imports the simulator and waits for
        `start(config)` (so its start overlaps the caller's own work). The sandbox shows the
        child the kernel file (config's kernel_path, else `kernel_path`), the folders of the
        kernel loader (config's loader, else `loader`: its "show" list) read-only, and the
        local modules the kernel imports (confine.local_modules), never a path in `hidden`
        (the problem file), nothing else of the caller's files."""
        import subprocess  # noqa: PLC0415 - parent side only
        import tempfile  # noqa: PLC0415
        from nkisim.sandbox import confine  # noqa: PLC0415
        self.timeout = CHILD_TIMEOUT_S if timeout is None else timeout
        self.proc = None
        self.ans = self.cmd = None
        self.log = None
        self._buf = bytearray()
        self.unavailable = None
        if config is not None:
            kernel_path = config.get("kernel_path", kernel_path)
            loader = config.get("loader", loader)
        visible = [NKISIM_DIR] + [str(p) for p in (loader or {}).get("show", ())]
        if kernel_path:
            visible.append(os.path.abspath(kernel_path))
            visible += confine.local_modules(kernel_path, exclude=hidden)
        try:
            seccomp_fd = confine.filter_fd()
        except confine.Unavailable as e:
            self.unavailable = str(e)
            self.start_error = self.unavailable
            self.started = False
            if config is not None:
                self.start(config)
            return
        ans_r, ans_w = os.pipe()
        cmd_r, cmd_w = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "HOME": "/tmp", "NKISIM_ANSWER_FD": str(ans_w),
               "NKISIM_COMMAND_FD": str(cmd_r)}
        env.update(confine.limits_env(int(self.timeout) + 60))
        self.log = tempfile.TemporaryFile(prefix="nkisim-child-")
        try:
            cmd = confine.command([sys.executable, "-I", "-B", os.path.abspath(__file__)],
                                  visible=[p for p in visible if os.path.exists(p)],
                                  seccomp_fd=seccomp_fd)
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env,
                pass_fds=(ans_w, cmd_r, seccomp_fd), close_fds=True)
            self.start_error = None
        except confine.Unavailable as e:
            self.unavailable = str(e)
            self.start_error = self.unavailable
        except OSError as e:
            self.start_error = "cannot start the kernel process: %s" % e
        finally:
            os.close(ans_w)
            os.close(cmd_r)
            os.close(seccomp_fd)
        self.ans = ans_r
        self.cmd = cmd_w
        self.started = False
        if config is not None:
            self.start(config)

    def start(self, config):
        """Send the load config (kernel_path, loader, target, input_names, ...)."""
        self.started = True
        if self.start_error is None:
            self.start_error = self._send(config)

    def _send(self, obj):
        try:
            os.write(self.cmd, (json.dumps(obj) + "\n").encode("utf-8"))
        except (OSError, TypeError) as e:
            return "the kernel process stopped listening: %s" % e
        return None

    def loaded(self):
        """The load answer: {"ok": true, "kernel_name"} or a failure."""
        if self.start_error:
            if not self.unavailable and self.proc is not None:
                self._wait(time.monotonic() + 5.0)  # bwrap's own start-up failure, if any
                self.unavailable = _sandbox_problem(self.log)
            self.close()
            return _failure("unavailable" if self.unavailable else "runtime_error",
                            self.unavailable or self.start_error)
        try:
            ans = self._message()
        except BaseException:
            self.close()
            raise
        if not ans.get("ok"):
            self.close()
        return ans

    def record(self, request):
        """Send the input specs; the trace answer (the process is finished afterwards)."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                return _failure("runtime_error", "the kernel process is gone")
            err = self._send(request)
            if err:
                return _failure("runtime_error", err)
            return self._message()
        finally:
            self.close()

    def _message(self):
        """The next answer line. Read in chunks into one growing buffer, each chunk searched
        once for the line's end (linear in the answer's size), at most MAX_ANSWER_BYTES."""
        deadline = time.monotonic() + self.timeout
        end = self._buf.find(b"\n")
        while end < 0:
            left = deadline - time.monotonic()
            if left <= 0:
                return _failure("timeout", "the kernel did not finish tracing within %gs"
                                % self.timeout)
            ready, _, _ = select.select([self.ans], [], [], min(left, 1.0))
            if not ready:
                if self.proc.poll() is not None and not _readable(self.ans):
                    break
                continue
            b = os.read(self.ans, 1 << 20)
            if not b:
                break
            k = b.find(b"\n")
            if k >= 0:
                end = len(self._buf) + k
            self._buf += b
            if end < 0 and len(self._buf) > MAX_ANSWER_BYTES:
                self._buf = bytearray()
                self.close()
                return _failure("runtime_error", "the kernel's process sent an answer of more "
                                "than %d MiB (a trace that large is refused; a kernel of that "
                                "many instructions needs larger instructions or loops that "
                                "repeat fewer of them)" % (MAX_ANSWER_BYTES >> 20))
        if end < 0:
            self._wait(deadline)
            code = self.proc.poll()
            problem = _sandbox_problem(self.log)
            if problem:
                return _failure("unavailable", problem)
            return _failure("runtime_error", "the kernel process ended without an answer"
                            + ("" if code in (0, None) else " (exit status %s)" % code))
        view = memoryview(self._buf)
        try:
            answer = json.loads(str(view[:end], "utf-8"))
        except (ValueError, UnicodeDecodeError):
            return _failure("runtime_error", "the kernel process wrote no valid answer")
        finally:
            view.release()
            del self._buf[:end + 1]
        if type(answer) is not dict or type(answer.get("ok")) is not bool:
            return _failure("runtime_error", "the kernel process wrote no valid answer")
        return answer

    def _wait(self, deadline):
        try:
            self.proc.wait(timeout=max(0.1, min(10.0, deadline - time.monotonic())))
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
            pass

    def close(self):
        """Stop the child (if still running) and release pipes; its prints go to stderr."""
        for fd in ("ans", "cmd"):
            v = getattr(self, fd, None)
            if v is not None:
                try:
                    os.close(v)
                except OSError:
                    pass
                setattr(self, fd, None)
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=0.5)
                except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                    self.proc.kill()
            self.proc.wait()
        if self.log is not None:
            _forward_log(self.log)
            self.log = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def record_trace(config, timeout=None):
    """Load and record in one go (config holds the load fields and the request fields)."""
    kp = KernelProcess(config, timeout)
    ans = kp.loaded()
    if not ans.get("ok"):
        return ans
    return kp.record({k: config.get(k) for k in ("inputs", "input_dtypes", "grid")})


def _readable(fd):
    r, _, _ = select.select([fd], [], [], 0)
    return bool(r)


def _sandbox_problem(log):
    """bwrap's own start-up failure, read from the child's log, or None."""
    from nkisim.sandbox import confine  # noqa: PLC0415
    if log is None:
        return None
    try:
        pos = log.tell()
        log.seek(0)
        text = log.read(1 << 14).decode("utf-8", "replace")
        log.seek(pos)
    except (OSError, ValueError):
        return None
    return confine.startup_problem(text)


def _forward_log(log):
    """The kernel's own prints go to our stderr (never to a result stream)."""
    try:
        log.seek(0)
        data = log.read(1 << 16)
        if data:
            sys.stderr.write(data.decode("utf-8", "replace"))
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    finally:
        log.close()


def _bind_to_parent():
    """Resource limits (CPU time, address space, file size, processes) before any kernel code,
    so a kernel that never finishes or allocates without bound cannot outlive or starve the
    evaluation; bwrap's --die-with-parent ends the sandbox with the harness."""
    if NKISIM_DIR not in sys.path:
        sys.path.insert(0, NKISIM_DIR)
    from nkisim.sandbox import confine  # noqa: PLC0415
    confine.apply_limits()


def _child_main():
    try:
        _bind_to_parent()
    except BaseException as e:  # noqa: BLE001 - no kernel code runs without its limits
        sys.stderr.write("kernel process: cannot set its limits: %s\n" % e)
        os._exit(3)
    out = os.fdopen(int(os.environ.pop("NKISIM_ANSWER_FD", "-1")), "w", encoding="utf-8")
    cmd = os.fdopen(int(os.environ.pop("NKISIM_COMMAND_FD", "-1")), "r", encoding="utf-8")

    def send(answer):
        try:
            out.write(_DUMPS(answer, separators=(",", ":"), allow_nan=False) + "\n")
            out.flush()
        except (OSError, ValueError, TypeError):
            pass  # the parent is gone or the answer is unusable: it sees no answer

    try:
        from nkisim.sandbox import record  # noqa: PLC0415
        record.prepare()
        line = cmd.readline()
        if not line:
            os._exit(0)  # never used
        config = json.loads(line)
        state = record.load(config)
        send(state if isinstance(state, dict) else {"ok": True, "kernel_name": state.name})
        if not isinstance(state, dict):
            line = cmd.readline()
            if line:
                send(record.trace(state, json.loads(line)))
    except SystemExit as e:
        send(_failure("runtime_error", "kernel code called exit(%s)" % (e.code,)))
    except BaseException as e:  # noqa: BLE001 - every failure becomes an answer
        send(_failure("runtime_error", "%s: %s" % (type(e).__name__, e)))
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    out.close()
    os._exit(0)


if __name__ == "__main__":
    _child_main()
