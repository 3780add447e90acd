"""out = factor(cfg) * x: an entry point that takes a config object (no default) and is
launched with a logical-core count, as the NKI Library's kernels are (`kernel[lnc](...)`)."""
import nki
import nki.isa as nisa
import nki.language as nl

from ..utils._tiles import _scale_into, _sbuf_tile
from ..utils.config import ScaleConfig, ScaleMode


@nki.jit
def scale_cfg(x: nl.ndarray, cfg: ScaleConfig) -> nl.ndarray:
    assert isinstance(cfg, ScaleConfig) and cfg.mode in (ScaleMode.DOUBLE, ScaleMode.HALVE)
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    x_sb = _sbuf_tile(rows, cols, cfg.dtype)
    nisa.dma_copy(dst=x_sb, src=x)
    _scale_into(x_sb, x_sb, cfg.factor())
    nisa.dma_copy(dst=out, src=x_sb)
    return out
