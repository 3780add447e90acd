"""The kernel's own process: record a kernel's trace in a child, hand back only the trace.

Parent side: `record_trace(config)` starts `python -I sandbox.py` with a minimal environment,
stdin from /dev/null, stdout and stderr to a scratch file (never the caller's streams) and
one dedicated pipe for the answer; it waits (bounded time and size), parses the answer as
JSON (no pickle anywhere) and returns it. A child that dies, hangs, writes no answer or
garbage gives a failure answer, never a trace.

Child side (this file run as a script): reads the config from argv, records the kernel with
`record.record` and writes one JSON answer to the answer pipe.

config: kernel_path, harness_dir, target, inputs (name -> {"shape", "dtype"} or
{"value": encoded}), input_dtypes, grid, kernel_name, problem_kernel.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time

NKISIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_TIMEOUT_S = float(os.environ.get("NKISIM_SANDBOX_TIMEOUT", "600"))
MAX_ANSWER_BYTES = 512 << 20


def _failure(kind, message, line=None):
    return {"ok": False, "kind": kind, "message": message, "line": line}


def record_trace(config, timeout=None):
    """Run the recorder in a child process; returns its answer dict (trace or failure)."""
    timeout = CHILD_TIMEOUT_S if timeout is None else timeout
    rfd, wfd = os.pipe()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "NKISIM_ANSWER_FD": str(wfd)}
    log = tempfile.TemporaryFile(prefix="nkisim-child-")
    cmd = [sys.executable, "-I", os.path.abspath(__file__), json.dumps(config)]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env, pass_fds=(wfd,), cwd=os.path.dirname(
                                    config["kernel_path"]) or "/", close_fds=True)
    except OSError as e:
        os.close(rfd)
        os.close(wfd)
        log.close()
        return _failure("runtime_error", "cannot start the kernel process: %s" % e)
    os.close(wfd)
    chunks = []
    size = 0
    deadline = time.monotonic() + timeout
    answer = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                answer = _failure("timeout", "the kernel did not finish tracing within %gs"
                                  % timeout)
                break
            ready, _, _ = select.select([rfd], [], [], min(left, 1.0))
            if not ready:
                if proc.poll() is not None and not _readable(rfd):
                    break
                continue
            b = os.read(rfd, 1 << 20)
            if not b:
                break
            size += len(b)
            if size > MAX_ANSWER_BYTES:
                answer = _failure("runtime_error", "the kernel's trace exceeds %d bytes"
                                  % MAX_ANSWER_BYTES)
                break
            chunks.append(b)
    finally:
        os.close(rfd)
        if answer is None:
            try:  # the answer is complete; the child is exiting
                proc.wait(timeout=max(0.1, min(10.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _forward_log(log)
    if answer is not None:
        return answer
    if proc.returncode != 0:
        return _failure("runtime_error", "the kernel process exited with status %s"
                        % proc.returncode)
    try:
        answer = json.loads(b"".join(chunks).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return _failure("runtime_error", "the kernel process wrote no valid answer")
    if type(answer) is not dict or type(answer.get("ok")) is not bool:
        return _failure("runtime_error", "the kernel process wrote no valid answer")
    return answer


def _readable(fd):
    r, _, _ = select.select([fd], [], [], 0)
    return bool(r)


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


def _child_main():
    fd = int(os.environ.get("NKISIM_ANSWER_FD", "-1"))
    out = os.fdopen(fd, "w", encoding="utf-8")
    os.environ.pop("NKISIM_ANSWER_FD", None)
    try:
        config = json.loads(sys.argv[1])
        if NKISIM_DIR not in sys.path:
            sys.path.insert(0, NKISIM_DIR)
        from nkisim import record  # noqa: PLC0415
        answer = record.record(config)
    except SystemExit as e:
        answer = _failure("runtime_error", "kernel code called exit(%s)" % (e.code,))
    except BaseException as e:  # noqa: BLE001 - every failure becomes an answer
        answer = _failure("runtime_error", "%s: %s" % (type(e).__name__, e))
    text = json.dumps(answer, separators=(",", ":"), allow_nan=False)
    out.write(text)
    out.flush()
    out.close()
    os._exit(0)


if __name__ == "__main__":
    _child_main()
