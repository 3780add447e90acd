"""State of the simulation in progress (one at a time per process).

`CUR` is the active `Sim` while a kernel runs, else None. Language and ISA functions read it
to find the scheduler, the target constants, the numerics switch and the statistics.
"""
import collections
import weakref

from . import constants as C
from . import costs as K
from .timing import NullScheduler, Scheduler, ValueScheduler

CUR = None


def hbm_dma_bandwidth(target):
    """Bytes/ns a core's DMA queues sustain between HBM and on-chip memory (costs.py)."""
    return K.hbm_dma_bandwidth(target)


class Sim:
    """Everything one `simulate` call accumulates."""

    def __init__(self, target, numerics=True, timing=True, liveness=True):
        """liveness: record on-chip allocations and the last instruction that touches each,
        for the capacity check and spill model at the end of the run. A timed run always
        records them. Off only where that check cannot change the outcome: recording a
        trace (the trusted replay checks it) and value-only replays of a trace already
        replayed with the check (it depends on the trace alone, not on the data)."""
        self.target = target
        self.numerics = numerics
        self.timing = timing
        self.liveness = liveness or timing
        if timing:
            self.sched = Scheduler(target)
        elif self.liveness:
            self.sched = NullScheduler(target)
        else:
            self.sched = ValueScheduler(target)
        self.sbuf_cap = target.sbuf_bytes_per_partition
        self.psum_cap = C.PSUM_BYTES_PER_PARTITION
        self.sbuf_peak = 0
        self.spill_save = 0      # bytes the compiler would spill to HBM and reload
        self.spill_reload = 0
        self.psum_peak = 0
        # on-chip allocations: (sequence number at allocation, bytes per partition,
        # DepState, 'sbuf'|'psum', kernel line, end time of the instruction before it);
        # liveness ends at the last access
        self.allocs = []
        self.hbm_read = 0
        self.hbm_write = 0
        self.sbuf_read = 0
        self.sbuf_write = 0
        self.psum_read = 0
        self.psum_write = 0
        self.dma_bytes = 0
        self.flops = 0.0
        self.transpose_flops = 0.0
        self.flops_peak_ns = 0.0  # sum over matmuls of flops / dtype-specific peak (ns)
        self.last_st = None
        self.last_eng = 0
        # duplicate-load elimination (core.kept_load): SBUF bytes per partition allocated so
        # far (the distance measure), the loads whose tiles the compiler may keep, and the
        # tiles made from them
        self.sbuf_alloc_seq = 0
        self.load_stream = 0  # bytes per partition of HBM regions loaded again (loadreuse)
        self.loaded_regions = set()  # HBM regions (storage, view) loaded so far
        self.kept_loads = collections.OrderedDict()
        self.kept_roots = set()  # HBM storages (roots) with kept loads, or kept before
        self.load_tiles = weakref.WeakKeyDictionary()
        self.last_work = None  # streaming cycles of the last VectorE cost priced (core)
        self.elems = [0, 0, 0, 0]  # output elements (all partitions) per engine (core)
        self.dma_runs = 0          # contiguous runs (descriptors) of HBM-side transfers (core)
        self.narrow_reduce = None  # (result storage, line) of the last narrow reduce (core)
        self.psum_reduce_lines = set()  # lines whose narrow reduces go to PSUM (core)
        self.matmul_count = 0
        self.program_id = (0,)
        self.grid = (1,)
        self.shared_allocs = []
        self.pool = {} if numerics else None  # (shape, numpy dtype) -> freed on-chip arrays
        self.shared_index = 0
        # pairs the sendrecv / core_barrier calls of a launch's programs (machine/sync.py):
        # a Rendezvous in the replay, sync.RECORDING while recording, None in a direct run
        self.sync = None
        # ns per cycle per engine
        self.ns_tensor = 1e9 / target.tensor_hz
        self.ns_vector = 1e9 / target.vector_hz
        self.ns_scalar = 1e9 / target.scalar_hz
        self.ns_gpsimd = 1e9 / target.gpsimd_hz
        self.costs = K.table(target)
        self.dma_bw = K.hbm_dma_bandwidth(target)
        self.dma_bw_onchip = K.onchip_dma_bandwidth(target)
