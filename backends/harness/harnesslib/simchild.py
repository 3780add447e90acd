"""The harness's part of the simulator's kernel process (nkisim/sandbox/process.py).

nkisim never imports the harness: the harness hands the sandbox a loader spec
(`loader_spec()`, a JSON object in the process's config), and the confined child imports
`module` from `path` and calls its `load(config, compile_errors)`. `show` lists the folders
the sandbox makes visible, read-only, for it (the harness library, nothing else of the
harness)."""
import os

HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loader_spec(harness_dir=HARNESS_DIR):
    """The loader entry of a kernel process's config."""
    return {"path": harness_dir, "module": "harnesslib.simchild",
            "show": [os.path.join(harness_dir, "harnesslib")]}


def load(config, compile_errors):
    """Inside the sandbox, with `nki` bound to proxy modules: install the host library
    stand-ins, import the kernel file, select the kernel. (name, kernel); raises
    HarnessFailure (kind, message, line) for a kernel that cannot be loaded."""
    from harnesslib import hostlibs  # noqa: PLC0415 - child side only
    from harnesslib.kernel import load_kernel_module, select_kernel  # noqa: PLC0415
    path = config["kernel_path"]
    names = list(config["input_names"])
    hostlibs.install(path, config.get("kernel_name") or config.get("problem_kernel"), names)
    module = load_kernel_module(path, tuple(compile_errors),
                                as_package=bool(config.get("call_hook")),
                                names=config.get("package_names"))
    if config.get("call_hook"):  # the problem builds the entry point's arguments itself
        from harnesslib import binding  # noqa: PLC0415
        name, kernel = binding.select_for_hook(
            module, path, config.get("kernel_name") or config.get("problem_kernel"))
        error = compile_errors[0] if compile_errors else RuntimeError
        return name, binding.bind(config, name, kernel, error)
    return select_kernel(module, path, names, explicit=config.get("kernel_name"),
                         problem_name=config.get("problem_kernel"))
