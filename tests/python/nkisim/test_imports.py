"""The nkisim package's imports run one way (storage -> instructions -> language front end):
no module imports, directly or through others, a module that imports it back, and none
imports the harness. Imports inside functions count too (a lazy import is still a cycle)."""
import ast
import os
import re
import sys
import unittest

from . import _util

PACKAGE = "nkisim"
PACKAGE_DIR = os.path.join(_util.SIM_DIR, PACKAGE)


def module_names(folder=PACKAGE_DIR, prefix=""):
    """Modules of the package by dotted name below it ("errors", "machine.core"); a
    subpackage's __init__ is named by the subpackage ("sandbox"), the package's own is
    "__init__"."""
    names = []
    for n in sorted(os.listdir(folder)):
        path = os.path.join(folder, n)
        if n.endswith(".py"):
            if n == "__init__.py":
                names.append(prefix[:-1] if prefix else "__init__")
            else:
                names.append(prefix + n[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            names += module_names(path, prefix + n + ".")
    return names


def module_file(name, folder=PACKAGE_DIR):
    parts = name.split(".")
    if name == "__init__":
        return os.path.join(folder, "__init__.py")
    if os.path.isdir(os.path.join(folder, *parts)):
        return os.path.join(folder, *parts, "__init__.py")
    return os.path.join(folder, *parts) + ".py"


def package_imports(source, modules, name="", is_package=False):
    """Modules of the package (dotted names in `modules`) that `source`, the module `name`,
    imports anywhere in its body: `from . import x`, `from .x import y`, `from ..p import x`,
    `import nkisim.x`, `from nkisim import x`, `from nkisim.p.x import y`. Importing from a
    subpackage the module is not part of runs that subpackage's __init__ too."""
    own = name.split(".") if is_package else name.split(".")[:-1]
    found = set()

    def add(target):
        if target in modules:
            found.add(target)
            parts = target.split(".")
            for i in range(1, len(parts) + (0 if target not in pkgs else 1)):
                outer = ".".join(parts[:i])
                if outer in modules and parts[:i] != own[:i]:
                    found.add(outer)

    pkgs = {m for m in modules if os.path.isdir(os.path.join(PACKAGE_DIR, *m.split(".")))}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1:
                    add(".".join(parts[1:]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own[:len(own) - (node.level - 1)] if node.level - 1 <= len(own) else None
                if base is None:
                    continue
            elif node.module and node.module.split(".")[0] == PACKAGE:
                base = []
            else:
                continue
            tail = (node.module or "").split(".") if node.module else []
            if node.level == 0:
                tail = tail[1:]
            base = ".".join(base + tail)
            for a in node.names:
                sub = (base + "." if base else "") + a.name
                if sub in modules:
                    add(sub)
                elif base:
                    add(base)


    return found


def import_graph(folder=PACKAGE_DIR):
    """{module: set of package modules it imports}; the package's __init__ is left out (it
    imports everything to offer the public API, and nothing imports it back)."""
    modules = set(module_names(folder)) - {"__init__"}
    graph = {}
    for name in sorted(modules):
        path = module_file(name, folder)
        with open(path, encoding="utf-8") as f:
            graph[name] = package_imports(f.read(), modules, name,
                                          path.endswith("__init__.py")) - {name}
    return graph


def find_cycle(graph):
    """One import cycle as a list of module names (first == last), or None."""
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def outside_imports(source):
    """Top-level names of the modules `source` imports that are neither the standard library,
    numpy nor nkisim itself, and string constants naming a harness module (an import by
    name, e.g. through importlib)."""
    allowed = set(sys.stdlib_module_names) | {"numpy", PACKAGE}
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.fullmatch(r"harnesslib(\.\w+)*", node.value)):
            found.add(node.value)
    return found - allowed


class ImportDirectionTest(unittest.TestCase):
    def test_package_has_no_import_cycle(self):
        cycle = find_cycle(import_graph())
        self.assertIsNone(cycle, "import cycle in nkisim: %s" % " -> ".join(cycle or ()))

    def test_layers(self):
        graph = import_graph()

        def reaches(a, b, seen=None):
            seen = set() if seen is None else seen
            for n in graph.get(a, ()):
                if n == b or (n not in seen and (seen.add(n) or reaches(n, b, seen))):
                    return True
            return False

        for low, high in (("data.buffers", "machine.core"), ("data.buffers", "api.language"),
                          ("machine.core", "api.language"), ("data.buffers", "api.isa"),
                          ("machine.timing", "data.buffers")):
            self.assertFalse(reaches(low, high), "%s must not import %s" % (low, high))
        self.assertTrue(reaches("api.language", "machine.core"))
        self.assertTrue(reaches("machine.core", "data.buffers"))

    def test_parts_import_one_way(self):
        # errors <- data, machine (one layer: storages carry timing state) <- the NKI API
        # surface <- the record/replay sandbox; never the other way
        rank = {"errors": 0, "data": 1, "machine": 1, "api": 2, "sandbox": 3}
        for module, targets in import_graph().items():
            for target in targets:
                a, b = module.split(".")[0], target.split(".")[0]
                self.assertLessEqual(rank[b], rank[a], "%s must not import %s" % (module, target))

    def test_simulator_never_imports_the_harness(self):
        # the harness depends on nkisim, never the other way: what the kernel process needs
        # from the harness (its kernel loader) is passed in
        for name in module_names():
            with open(module_file(name), encoding="utf-8") as f:
                outside = outside_imports(f.read())
            self.assertEqual(outside, set(), "nkisim.%s imports %s" % (name, sorted(outside)))

    def test_outside_import_detector(self):
        self.assertEqual(outside_imports("def f():\n    from harnesslib.kernel import x\n"),
                         {"harnesslib"})
        self.assertEqual(outside_imports("import importlib\nimportlib.import_module("
                                         "'harnesslib.hostlibs')\n"), {"harnesslib.hostlibs"})
        self.assertEqual(outside_imports("import os, numpy as np\nfrom nkisim import errors\n"
                                         "from . import x\n"), set())

    def test_operators_reach_the_front_end(self):
        # buffers.py no longer imports language.py; the package installs the operations.
        import nkisim.data.buffers as B
        import nkisim.api.language as L
        for name in B.FRONT_END_OPS:
            self.assertIs(B.front_end(name), getattr(L, name))

    def test_detector_finds_cycles(self):
        modules = {"a", "b", "c"}
        graph = {"a": package_imports("def f():\n    from . import b\n", modules),
                 "b": package_imports("from .c import x\n", modules),
                 "c": package_imports("import nkisim.a as A\n", modules)}
        self.assertEqual(find_cycle(graph), ["a", "b", "c", "a"])
        graph["c"] = package_imports("import os\nfrom nkisim import errors\n", modules)
        self.assertIsNone(find_cycle(graph))

    def test_detector_resolves_subpackages(self):
        modules = {"errors", "api", "api.language", "machine", "machine.core", "sandbox",
                   "sandbox.process", "sandbox.confine"}
        self.assertEqual(package_imports("from ..machine import core\nfrom .. import errors\n"
                                         "from .language import x\n", modules, "api.isa"),
                         {"machine", "machine.core", "errors", "api.language"})
        self.assertEqual(package_imports("def f():\n    from nkisim.sandbox import confine\n",
                                         modules, "sandbox.process"), {"sandbox.confine"})
        self.assertEqual(package_imports("from .process import KernelProcess\n", modules,
                                         "sandbox", is_package=True), {"sandbox.process"})
        self.assertEqual(package_imports("import nkisim.api.language as L\n", modules, "errors"),
                         {"api", "api.language"})


if __name__ == "__main__":
    unittest.main()
