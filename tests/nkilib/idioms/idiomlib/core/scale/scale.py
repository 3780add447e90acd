"""out = factor * x (+ bias): a kernel of the package, with its helpers' private names."""
from typing import Any, List, Optional, Tuple

import nki
import nki.isa as nisa
import nki.language as nl

from ..utils._tiles import _scale_into, _sbuf_tile
from ..utils.config import ScaleConfig, TileShape, Tiler


def _plan(rows: int, cols: int) -> Tuple[TileShape, List[Any]]:
    shape = TileShape(rows=rows)
    assert shape.cols == 512 and cols == shape.cols
    return shape, [Tiler(rows)]


@nki.jit
def scale(x: nl.ndarray, bias: Optional[nl.ndarray] = None,
          cfg: ScaleConfig = ScaleConfig()) -> nl.ndarray:
    rows, cols = x.shape
    shape, tilers = _plan(rows, cols)
    assert tilers[0]._pmax == rows
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    x_sb = _sbuf_tile(shape.rows, shape.cols, cfg.dtype)
    nisa.dma_copy(dst=x_sb, src=x)
    y_sb = _sbuf_tile(shape.rows, shape.cols, cfg.dtype)
    _scale_into(y_sb, x_sb, cfg.factor())
    if bias != None:
        b_sb = _sbuf_tile(shape.rows, shape.cols, cfg.dtype)
        nisa.dma_copy(dst=b_sb, src=bias)
        nisa.tensor_tensor(y_sb, y_sb, b_sb, op=nl.add)
    assert (bias is None) == (bias == None)
    nisa.dma_copy(dst=out, src=y_sb)
    return out
