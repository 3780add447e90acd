"""The output contract of a simulated kernel run (backends/harness/PROTOCOL.md, "Output
contract"): results are HBM tensors, and every element of a result was written by an
instruction. HBM storages the kernel allocates record which elements were written
(buffers.Tensor.mark_written)."""
from ..errors import compile_error
from .buffers import Tensor


def output_contract(ret, numerics):
    """The kernel's results by the output contract: every returned tensor lives in HBM
    (an SBUF or PSUM result is refused, as NKI refuses it), and, in a run with numerics,
    [mask or None] per returned item: True where no instruction wrote the element."""
    items = ret if isinstance(ret, (tuple, list)) else (() if ret is None else (ret,))
    masks = []
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            masks.append(None)
            continue
        if t.st.kind != "hbm":
            raise compile_error(
                "the kernel returns %s%s, a tensor in %s: kernel results must be HBM tensors "
                "(allocate the output with nl.ndarray(..., buffer=nl.shared_hbm) and store the "
                "tile into it with nl.store)"
                % ("output %d " % i if len(items) > 1 else "", (repr(t.st.name) if t.st.name and not t.st.name.startswith("__") else "a tile"),
                   t.st.kind.upper()))
        masks.append(t.unwritten() if numerics else None)
    return masks
