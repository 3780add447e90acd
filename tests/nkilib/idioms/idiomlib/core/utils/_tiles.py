"""Private tile helpers of the package (a single-underscore module, imported by siblings)."""
import nki.isa as nisa
import nki.language as nl

_PMAX = 128


def _sbuf_tile(rows, cols, dtype=nl.float32):
    return nl.ndarray((rows, cols), dtype=dtype, buffer=nl.sbuf, address=None)


def _scale_into(dst, src, factor):
    nisa.tensor_scalar(dst, src, op0=nl.multiply, operand0=factor)
