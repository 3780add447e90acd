"""The static scan and the two dunder forms the NKI Library's own package code uses
(core/topk/rotational_topk.py): `f"{cfg.__dict__}"` and `object.__setattr__(cfg, "_name", v)`
on the package's own object pass; every other use of them, and every use that could reach a
simulator object, is still refused."""
import textwrap
import unittest

from tests.python.harness import util  # noqa: F401  (puts the harness folder on sys.path)

from harnesslib import scan  # noqa: E402

HEAD = '''
import dataclasses
import nki
import nki.isa as nisa
import nki.language as nl


@dataclasses.dataclass(frozen=True)
class Config(nl.NKIObject):
    rows: int = 128


def prepare(cfg):
    %s
    return cfg


@nki.jit
def kernel(a, b):
    cfg = prepare(Config())
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    %s
    nisa.dma_copy(dst=out, src=a)
    return out
'''


def findings(helper_line="pass", kernel_line="pass"):
    src = textwrap.dedent(HEAD) % (helper_line, kernel_line)
    return [(f.rule, f.reason) for f in scan.scan_source(src, tensor_names=("a", "b"))]


class LibraryForms(unittest.TestCase):
    def test_the_library_forms_pass(self):
        self.assertEqual(findings(
            'object.__setattr__(cfg, "_cache", {"k": 1})',
            'assert cfg.rows > 0, f"config {cfg.__dict__} is not valid"'), [])

    def test_dict_outside_an_fstring_value_is_refused(self):
        for line in ('d = cfg.__dict__',
                     'assert cfg.rows, f"{cfg.__dict__[0]}"',
                     'assert cfg.rows, f"{cfg.__dict__.keys()}"',
                     'assert cfg.rows, f"{nl.__dict__}" and nl.__dict__["runtime"]'):
            with self.subTest(line):
                self.assertIn("private", [r for r, _ in findings(kernel_line=line)])

    def test_setattr_that_could_reach_the_simulator_is_refused(self):
        for line in ('object.__setattr__(out, "_cache", 1)',        # an NKI result
                     'object.__setattr__(a, "_cache", 1)',          # a problem tensor
                     'object.__setattr__(cfg, "_nkisim_id", 1)',    # the sandbox proxy slot
                     'object.__setattr__(cfg, "__class__", Config)',  # a dunder
                     'object.__setattr__(cfg, "shape", (1, 1))',    # a simulator attribute
                     'object.__setattr__(cfg, "st", None)',
                     'object.__setattr__(nl, "_cache", 1)',         # an imported module
                     'object.__setattr__(cfg, "_c" + "x", 1)',      # a computed name
                     'object.__setattr__(cfg, *("_c", 1))',
                     'object.__setattr__(cfg, "_c")'):
            with self.subTest(line):
                self.assertIn("private", [r for r, _ in findings(kernel_line=line)])


if __name__ == "__main__":
    unittest.main()
