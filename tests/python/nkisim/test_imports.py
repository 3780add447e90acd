"""The nkisim package's imports run one way (storage -> instructions -> language front end):
no module imports, directly or through others, a module that imports it back. Imports inside
functions count too (a lazy import is still a cycle)."""
import ast
import os
import unittest

from . import _util

PACKAGE = "nkisim"
PACKAGE_DIR = os.path.join(_util.SIM_DIR, PACKAGE)


def module_names(folder=PACKAGE_DIR):
    return sorted(n[:-3] for n in os.listdir(folder) if n.endswith(".py"))


def package_imports(source, modules):
    """Sibling modules (names in `modules`) that `source`, a module of the package, imports
    anywhere in its body: `from . import x`, `from .x import y`, `import nkisim.x`,
    `from nkisim import x`, `from nkisim.x import y`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1 and parts[1] in modules:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1 or (node.level == 0 and node.module
                                   and node.module.split(".")[0] == PACKAGE):
                base = node.module or ""
                if node.level == 0:
                    base = ".".join(base.split(".")[1:])
                if base:
                    head = base.split(".")[0]
                    if head in modules:
                        found.add(head)
                else:
                    found.update(a.name for a in node.names if a.name in modules)
    return found


def import_graph(folder=PACKAGE_DIR):
    """{module: set of sibling modules it imports}; the package's __init__ is left out (it
    imports everything to offer the public API, and nothing imports it back)."""
    modules = set(module_names(folder)) - {"__init__"}
    graph = {}
    for name in sorted(modules):
        with open(os.path.join(folder, name + ".py"), encoding="utf-8") as f:
            graph[name] = package_imports(f.read(), modules) - {name}
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

        for low, high in (("buffers", "core"), ("buffers", "language"), ("core", "language"),
                          ("buffers", "isa"), ("timing", "buffers")):
            self.assertFalse(reaches(low, high), "%s must not import %s" % (low, high))
        self.assertTrue(reaches("language", "core"))
        self.assertTrue(reaches("core", "buffers"))

    def test_operators_reach_the_front_end(self):
        # buffers.py no longer imports language.py; the package installs the operations.
        import nkisim.buffers as B
        import nkisim.language as L
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


if __name__ == "__main__":
    unittest.main()
