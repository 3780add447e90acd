"""The one API table (nkisim/api/table.json) against the simulator: every name marked modelled
exists in the simulator and every name the simulator defines is in the table; the unmodelled
documented names exist and raise a clear error; the boundary allow-list is the table's.
Prints the coverage figure (documented names modelled / total)."""
import importlib.util
import json
import os
import unittest

from . import _util  # noqa: F401  (activates the simulator)
from nkisim.api import table as T
from nkisim.errors import NkiCompileError
from nkisim.sandbox import boundary as B

SCRIPT = os.path.join(_util.SIM_DIR, "gen_api_table.py")


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_api_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ApiTableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gen = load_generator()
        cls.mods, cls.tensor = cls.gen.surface()
        cls.entries = T.entries()

    def obj(self, e):
        if e["module"] == "nki.language.NkiTensor":
            return getattr(self.tensor, e["name"], None)
        return getattr(self.mods[e["module"]], e["name"], None)

    def test_committed_table_matches_regeneration(self):
        with open(T.PATH, encoding="utf-8") as f:
            committed = f.read()
        docs = [e for e in json.loads(committed)["entries"] if e["documented"]]
        self.assertEqual(committed, self.gen.render(docs, T.load()["source"]),
                         "nkisim/api/table.json is stale: run /usr/bin/python3 "
                         "backends/nkisim/gen_api_table.py")

    def test_modelled_names_exist_and_unmodelled_ones_are_stand_ins(self):
        for e in self.entries:
            full = "%s.%s" % (e["module"], e["name"])
            obj = self.obj(e)
            if e["modelled"]:
                self.assertIsNotNone(obj, full)
                self.assertFalse(getattr(obj, "nkisim_unmodelled", False), full)
            elif obj is not None:
                self.assertFalse(self.gen._is_modelled(obj), full)

    def test_every_simulator_api_name_is_in_the_table(self):
        listed = {(e["module"], e["name"]) for e in self.entries}
        for module, mod in self.mods.items():
            for name, obj in vars(mod).items():
                if self.gen._boundary(module, mod, name, obj) is not None:
                    self.assertIn((module, name), listed, "%s.%s" % (module, name))

    def test_documented_functions_all_exist_in_isa_and_language(self):
        for module in ("nki.isa", "nki.language"):
            for e in T.entries(module):
                if e["documented"] and e["kind"] == "function":
                    self.assertIsNotNone(self.obj(e), "%s.%s" % (module, e["name"]))

    def test_an_unmodelled_name_raises_a_compile_error_naming_it(self):
        missing = [e for e in T.entries("nki.isa")
                   if e["documented"] and not e["modelled"] and e["kind"] == "function"]
        if not missing:
            self.skipTest("every documented nki.isa function is modelled")
        e = missing[0]
        with self.assertRaises(NkiCompileError) as cm:
            self.obj(e)()
        self.assertIn("nisa." + e["name"], str(cm.exception))
        self.assertIn("not model", str(cm.exception))

    def test_boundary_allow_list_is_the_tables(self):
        api = B.api_table()
        for module in B._API_MODULES:
            for name in T.boundary_names(module):
                if getattr(self.mods[module], name, None) is not None:
                    self.assertIn("%s.%s" % (module, name), api)
        table_names = {"%s.%s" % (e["module"], e["name"]) for e in self.entries
                       if e["boundary"] == "api"}
        for full in api:
            module, name = full.rsplit(".", 1)
            if module in B._API_MODULES and not name.startswith("_"):
                self.assertIn(full, table_names)
        self.assertEqual(B.RAW_NAMES, T.raw_names())
        self.assertIn("affine_range", B.RAW_NAMES)

    def test_entries_state_signature_engines_and_targets(self):
        matmul = T.entry("nki.isa.nc_matmul")
        self.assertTrue(matmul["signature"].startswith("nc_matmul(dst, stationary, moving"))
        self.assertIn("tile_position=()", matmul["signature"])
        self.assertEqual(matmul["engines"], ["TensorE"])
        self.assertEqual(T.entry("nki.isa.nc_matmul_mx")["targets"], ["trn3"])
        self.assertEqual(T.entry("nki.isa.dma_copy")["targets"], ["trn2", "trn3"])
        self.assertIn("VectorE", T.entry("nki.isa.tensor_tensor")["engines"])
        self.assertEqual(T.entry("nki.language.bfloat16")["kind"], "dtype")
        self.assertEqual(T.entry("nki.language.sbuf")["kind"], "buffer")

    def test_coverage_figure(self):
        modelled, total = T.coverage()
        self.assertGreater(total, 200)
        self.assertEqual(T.load()["coverage"], {
            "modelled": modelled, "documented": total,
            "percent": round(100.0 * modelled / total, 1)})
        missing = sorted("%s.%s" % (e["module"], e["name"]) for e in self.entries
                         if e["documented"] and not e["modelled"])
        print("\nNKI API coverage: %d / %d documented names modelled (%.1f%%); missing: %s"
              % (modelled, total, 100.0 * modelled / total, ", ".join(missing)))

    def test_check_mode_reports_a_stale_file(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "table.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write("{}\n")
            self.assertEqual(self.gen.main(["--check", "--out", path]), 1)
            self.assertEqual(self.gen.main(["--out", path]), 0)
            self.assertEqual(self.gen.main(["--check", "--out", path]), 0)


if __name__ == "__main__":
    unittest.main()
