"""`nki.isa` (nisa): one function per engine instruction, gathered from its concept modules
(isa_base: enums and argument binding; isa_matmul: TensorE; isa_scalar: ScalarE; isa_vector:
VectorE / GpSimdE; isa_pattern: iota / affine_select patterns; isa_predicated: predicated
copies and selects; isa_gather: gathers and shuffles; isa_trn3: exponential, activate2;
isa_dma: DMA; isa_sync: barriers, registers and the multi-core hooks).

Every function accepts both API styles: the new one (SDK >= 2.27) with an explicit `dst`
first (positionally or by keyword) and no return value, and the old one that returns a new
tile (and may take `dtype=` / `mask=`). Every documented name of the API table
(nkisim/api/table.json) exists here: the ones nkisim does not model raise a compile error.
"""
from . import access as _access
from . import mx as _mx
from . import table as _table
from . import views as _views
from .isa_base import (engine, dge_mode, oob_mode, reduce_cmd, matmul_perf_mode, dma_engine,
                       nc_version, get_nc_sub_version, get_nc_version, tensor_engine,
                       vector_engine, scalar_engine, gpsimd_engine, unknown_engine)  # noqa: F401
from .isa_matmul import (nc_matmul, nc_transpose, nc_matmul_mx, quantize_mx)  # noqa: F401
from .isa_scalar import (activation, activation_reduce)  # noqa: F401
from .isa_vector import (tensor_tensor, tensor_scalar, scalar_tensor_tensor, tensor_reduce,
                         tensor_partition_reduce, tensor_copy, memset, reciprocal,
                         tensor_tensor_scan, bn_stats, bn_aggr, tensor_scalar_reduce, max8,
                         nc_find_index8, dropout)  # noqa: F401
from .isa_pattern import iota, affine_select  # noqa: F401  (both API forms)
from .isa_predicated import (tensor_copy_predicated, range_select,  # noqa: F401
                             select_reduce, tensor_scalar_cumulative)
from .isa_gather import (nc_n_gather, local_gather, nonzero_with_count,  # noqa: F401
                         nc_match_replace8, nc_stream_shuffle)
from .isa_dma import (dma_copy, dma_transpose, dma_compute)  # noqa: F401
from .isa_sync import (core_barrier, register_alloc, sendrecv)  # noqa: F401
from .isa_trn3 import exponential, activate2  # noqa: F401

_mx.install()  # `t.ap(..., dtype=)`
_access.install()  # `t.ap(..., scalar_offset=, vector_offset=)`, around mx's
_views.install()  # `t.slice(...)`, `t.permute(...)`, ... (NkiTensor view methods)
_table.install_unmodelled(globals(), "nki.isa")  # every documented name exists (table.json)
