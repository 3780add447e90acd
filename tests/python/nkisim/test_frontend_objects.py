"""The NKI 0.3+ front end's plain-Python objects: nl.NKIObject, nki.dtype, address=, and
tensors compared with None as Python objects."""
import dataclasses
import unittest
from typing import Optional

import numpy as np

from tests.python.nkisim import _util  # noqa: F401  (activates the simulator)

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


class Shape(nl.NKIObject):
    rows: int
    cols: int = 512


class Wide(Shape):
    depth: int = 2
    cols: int = 1024


@dataclasses.dataclass(frozen=True)
class Frozen(nl.NKIObject):
    factor: float = 2.0
    dtype: nki.dtype = nl.bfloat16

    def __post_init__(self):
        if self.factor <= 0:
            raise ValueError("factor must be positive")


class NKIObjectSemantics(unittest.TestCase):
    def test_keyword_and_positional_construction_with_defaults(self):
        s = Shape(rows=128)
        self.assertEqual((s.rows, s.cols), (128, 512))
        self.assertEqual((Shape(64, 256).rows, Shape(64, 256).cols), (64, 256))
        self.assertIn("rows=128", repr(s))

    def test_subclass_fields_follow_the_bases_and_take_new_defaults(self):
        w = Wide(rows=8)
        self.assertEqual((w.rows, w.cols, w.depth), (8, 1024, 2))
        self.assertEqual(Wide(1, 2, 3).depth, 3)

    def test_unknown_fields_are_named_and_missing_ones_stay_unset(self):
        s = Shape()  # NKI leaves a field without value or default unset
        self.assertFalse(hasattr(s, "rows"))
        s.rows = 4
        self.assertEqual((s.rows, s.cols), (4, 512))
        with self.assertRaisesRegex(TypeError, "unexpected field 'colz'"):
            Shape(rows=1, colz=2)

    def test_dataclass_configs_keep_dataclass_behaviour(self):
        f = Frozen()
        self.assertEqual(f, Frozen(2.0, nl.bfloat16))
        with self.assertRaises(dataclasses.FrozenInstanceError):
            f.factor = 3.0
        with self.assertRaisesRegex(ValueError, "positive"):
            Frozen(factor=-1.0)

    def test_dataclass_of_plain_class_attributes_is_built_by_keyword(self):
        @dataclasses.dataclass
        class Section(nl.NKIObject):  # as the library's SectionParams: no annotations
            idx = None
            offset = None
        s = Section(idx=2, offset=512)
        self.assertEqual((s.idx, s.offset), (2, 512))
        self.assertIsNone(Section().idx)
        with self.assertRaisesRegex(TypeError, "unexpected field 'other'"):
            Section(other=1)

    def test_dataclass_default_factory(self):
        @dataclasses.dataclass
        class Holder(nl.NKIObject):
            items: list = dataclasses.field(default_factory=list)
        a, b = Holder(), Holder()
        a.items.append(1)
        self.assertEqual(b.items, [])

    def test_a_class_with_its_own_init_keeps_it(self):
        class Tile(nl.NKIObject):
            def __init__(self, n):
                self.size = n * 2
        self.assertEqual(Tile(4).size, 8)

        class Wider(Tile):  # and so do its subclasses
            pass
        self.assertEqual(Wider(3).size, 6)

    def test_nki_dtype_annotation(self):
        self.assertIsInstance(nl.bfloat16, nki.dtype)
        self.assertIsInstance(nl.float32, nki.dtype)
        self.assertNotIsInstance(3, nki.dtype)
        self.assertEqual(Optional[nki.dtype].__args__[0], nki.dtype)


def _kernel(x, bias: Optional[nl.ndarray] = None):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
    u = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf, address=None)
    nisa.dma_copy(dst=t, src=x)
    assert bias == None and not (bias != None) and t != None and not (t == None)  # noqa: E711
    nisa.tensor_scalar(u, t, op0=nl.multiply, operand0=3.0)
    nisa.dma_copy(dst=out, src=u)
    return out


class AddressAndNone(unittest.TestCase):
    def test_address_is_accepted_and_named_as_not_honoured(self):
        x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
        k = nki.jit(_kernel)
        np.testing.assert_allclose(k(x), 3.0 * x)
        effects = k.last_result.compiler_effects
        self.assertEqual(len([e for e in effects if "address=" in e]), 1, effects)

    def test_a_malformed_address_is_a_compile_error(self):
        def bad(x):
            nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf, address="top")
            return x
        with self.assertRaisesRegex(Exception, "address must be None or"):
            nki.jit(bad)(np.zeros((128, 4), np.float32))


if __name__ == "__main__":
    unittest.main()
