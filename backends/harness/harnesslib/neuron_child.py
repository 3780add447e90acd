"""The confined side of device `neuron` (harnesslib/neuron_sandbox.py): runs inside the OS
sandbox, imports the SDK and the kernel, performs one request, answers one JSON line on the
descriptor named by AUTOCOMP_ANSWER_FD, then exits.

request (stdin, one JSON line): op (load, run, benchmark, profile), kernel_path, target,
command, box (the writable folder), harness_dir, nkisim_dir, sdk_paths, input_names,
kernel_name, problem_kernel; for run/benchmark/profile also inputs (name -> {"file"} or
{"value"}), grid, out_dir, warmup, iters.
"""
import json
import os
import sys


def main():
    out = os.fdopen(int(os.environ.pop("AUTOCOMP_ANSWER_FD", "-1")), "w", encoding="utf-8")

    def send(answer):
        try:
            out.write(json.dumps(answer, allow_nan=False) + "\n")
            out.flush()
        except (OSError, ValueError, TypeError):
            pass

    try:
        req = json.loads(sys.stdin.readline())
        sys.path.insert(0, os.path.join(req["nkisim_dir"], "nkisim", "sandbox"))
        import confine  # noqa: PLC0415 - the limits come before any kernel code
        confine.apply_limits()
        sys.path.remove(os.path.join(req["nkisim_dir"], "nkisim", "sandbox"))
        del sys.modules["confine"]
        for path in reversed(req.get("sdk_paths") or []):
            if path not in sys.path:
                sys.path.append(path)
        sys.path.insert(0, req["harness_dir"])
        send(perform(req))
    except SystemExit as e:
        send({"ok": False, "kind": "runtime_error", "message": "kernel code called exit(%s)"
              % (e.code,)})
    except BaseException as e:  # noqa: BLE001 - every failure becomes an answer
        kind = getattr(e, "kind", None)
        if isinstance(kind, str) and isinstance(getattr(e, "message", None), str):
            send({"ok": False, "kind": kind, "message": e.message,
                  "line": getattr(e, "line", None)})
        else:
            send({"ok": False, "kind": "runtime_error", "message": "%s: %s"
                  % (type(e).__name__, e)})
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    out.close()
    os._exit(0)


def perform(req):
    import numpy as np  # noqa: PLC0415
    from harnesslib.neuron import NeuronDevice  # noqa: PLC0415
    from harnesslib import hostlibs  # noqa: PLC0415
    device = NeuronDevice(req["target"], req["kernel_path"], req["box"], req["command"])
    hostlibs.install(req["kernel_path"], req.get("kernel_name") or req.get("problem_kernel"),
                     list(req["input_names"]))
    handle = device.load_kernel(req["kernel_path"], req["input_names"], req.get("kernel_name"),
                                req.get("problem_kernel"))
    if req["op"] == "load":
        return {"ok": True, "kernel_name": handle.name}
    inputs = {}
    for name, spec in (req.get("inputs") or {}).items():
        inputs[name] = np.load(spec["file"], allow_pickle=False) if "file" in spec \
            else spec["value"]
    grid = tuple(req["grid"]) if isinstance(req.get("grid"), list) else req.get("grid")
    dtypes = req.get("input_dtypes") or {}
    if req["op"] == "run":
        outs, names = device.run(handle, inputs, grid=grid, input_dtypes=dtypes)
        os.makedirs(req["out_dir"], exist_ok=True)
        files = []
        for i, (arr, name) in enumerate(zip(outs, names)):
            path = os.path.join(req["out_dir"], "out%d.npy" % i)
            np.save(path, np.asarray(arr), allow_pickle=False)
            files.append({"file": path, "dtype": name})
        return {"ok": True, "outputs": files, "neff": device.neff}
    if req["op"] == "benchmark":
        return {"ok": True, "samples": device.benchmark_samples(
            handle, inputs, int(req["warmup"]), int(req["iters"]), grid=grid,
            input_dtypes=dtypes)}
    if req["op"] == "profile":
        return {"ok": True, "metrics": device.profile_metrics(handle, inputs, grid=grid,
                                                              input_dtypes=dtypes)}
    return {"ok": False, "kind": "runtime_error", "message": "unknown op %r" % req["op"]}


if __name__ == "__main__":
    main()
