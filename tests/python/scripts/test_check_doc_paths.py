"""scripts/check_doc_paths.py: every repository path the docs name exists."""
import importlib.util
import io
import os
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SPEC = importlib.util.spec_from_file_location(
    "check_doc_paths", os.path.join(ROOT, "scripts", "check_doc_paths.py"))
check_doc_paths = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_doc_paths)


def run(root):
    out = io.StringIO()
    with redirect_stdout(out):
        status = check_doc_paths.main(["check_doc_paths.py", root])
    return status, out.getvalue()


class DocPathsTest(unittest.TestCase):
    def make_tree(self, readme):
        root = tempfile.mkdtemp()
        os.makedirs(os.path.join(root, "server"))
        os.makedirs(os.path.join(root, "backends", "harness", "harnesslib"))
        open(os.path.join(root, "server", "methods.cpp"), "w").close()
        open(os.path.join(root, "backends", "harness", "harnesslib", "scan.py"), "w").close()
        with open(os.path.join(root, "README.md"), "w") as handle:
            handle.write(readme)
        return root

    def test_the_repository_docs_name_only_existing_paths(self):
        status, out = run(ROOT)
        self.assertEqual(status, 0, out)

    def test_a_missing_path_is_reported_with_file_and_line(self):
        root = self.make_tree("ok `server/methods.cpp`\nstale `server/gone.cpp`\n")
        status, out = run(root)
        self.assertEqual(status, 1)
        self.assertIn("README.md:2: server/gone.cpp", out)
        self.assertNotIn("methods.cpp", out.replace("1 missing", ""))

    def test_links_short_roots_methods_and_placeholders(self):
        root = self.make_tree(
            "[m](server/methods.cpp) `harnesslib/scan.py` `tools/call` `server/<x>.cpp`\n"
            "`~/.ssh/config` `/tmp/x.py` https://example.com/a.py\n")
        status, out = run(root)
        self.assertEqual(status, 0, out)
        root = self.make_tree("[gone](server/nope.md)\n")
        status, out = run(root)
        self.assertEqual(status, 1)
        self.assertIn("server/nope.md", out)


if __name__ == "__main__":
    unittest.main()
