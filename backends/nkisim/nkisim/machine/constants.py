"""Hardware constants for the trn1 (NeuronCore-v2), trn2 (NeuronCore-v3) and trn3 (NeuronCore-v4)
timing models.

Every value cites its source in /work/shared/reference/nki.md (section, and the AWS source
it quotes). "[derived]" marks arithmetic on documented numbers; "[model]" marks a modelling
choice explained in MODEL.md.
"""

KIB = 1024


class Target:
    """One parameter set. Times are in nanoseconds, clocks in Hz, bandwidths in bytes/ns.

    The fitted cost parameters (per-instruction and per-element engine costs, DMA efficiency,
    descriptor overhead, transpose efficiency, GpSimd element rates) are not here: each
    target's cost table (cost_tables.json, read through costs.py) holds them. The comments
    below still explain where their original values came from."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return "Target(%s)" % self.name


# ---- Shared by both generations -------------------------------------------------------

# 128 partitions (PE rows / SBUF partitions). nki.md §1.9 `nl.tile_size.pmax`=128 [doc].
PMAX = 128
# Matmul stationary free size <= 128. nki.md §1.8/§1.9 `gemm_stationary_fmax`=128 [doc].
GEMM_STATIONARY_FMAX = 128
# Matmul moving free size <= 512. nki.md §1.8/§1.9 `gemm_moving_fmax`=512 [doc].
GEMM_MOVING_FMAX = 512
# PSUM: 8 banks x 2 KiB per partition (16 KiB). nki.md §1.4, §4.1 [doc: arch guides].
PSUM_BANK_BYTES = 2 * KIB
PSUM_NUM_BANKS = 8
PSUM_BYTES_PER_PARTITION = PSUM_BANK_BYTES * PSUM_NUM_BANKS
# bn_stats free size <= 512. nki.md §1.9 `bn_stats_fmax` [doc].
BN_STATS_FMAX = 512
# Vector/Scalar free size limits: 64K elements from SBUF, 4K from PSUM. nki.md §1.9 [doc].
VECTOR_FMAX_SBUF = 65536
VECTOR_FMAX_PSUM = 4096
# Minimum initiation interval for Vector/Scalar ops: ~64 engine cycles. nki.md §4.2 [doc].
MIN_II_CYCLES = 64
# Static overhead to start a tensor access on an SBUF/PSUM port: ~60 cycles. nki.md §4.2 [doc].
ACCESS_OVERHEAD_CYCLES = 60
# GpSimd start-up ~150 cycles + N. nki.md §4.2 [doc].
GPSIMD_STARTUP_CYCLES = 150
# TensorE MM_INIT_LATENCY = 64 cycles. nki.md §4.2 [doc]. Charged only when TensorE is idle
# when the matmul/transpose becomes ready: back-to-back instructions stream at the documented
# average max(min(64, N_stationary), N_moving) (~512 cycles for a full 128x128x512 tile,
# nki.md §4.2 "[derived]"), the init latency hidden by the pipeline [model].
MATMUL_INIT_CYCLES = 64
# fp32 matmul runs at 1/4 of the bf16 rate. nki.md §4.2 ("4x that for fp32") [doc].
MATMUL_FP32_FACTOR = 4
# VectorE reciprocal is 8x slower: max(MIN_II, 8N). nki.md §4.2 [doc].
VECTOR_RECIPROCAL_FACTOR = 8
# bn_aggr costs max(MIN_II, 13N/3). nki.md §4.2 [doc].
BN_AGGR_FACTOR = 13.0 / 3.0
# DMA: a transfer is split across 16 DMA engines per core. nki.md §4.1 / §4.3 [doc].
DMA_ENGINES = 16
# Each DMA engine handles 8 partitions of a 128-partition tile. nki.md §4.3 [doc].
DMA_ROWS_PER_ENGINE = 8
# ~1300 ns cross-engine semaphore-to-start latency per DMA transfer. nki.md §4.3 [doc].
DMA_FIXED_NS = 1300.0
# Per-descriptor overhead, in byte-equivalents of bandwidth (the trn2 value; each Target
# carries its own as `dma_descriptor_bytes`). Chosen so efficiency b/(b+512) is ~33% at
# 256 B, ~80% at 2 KiB and ~89% at 4 KiB per partition row, matching nki.md §4.3 "< 256 B
# badly overhead-bound; >= 2 KiB recommended; >= 4 KiB nearly saturates" (the DMA bandwidth
# guide, written for trn2 and later) [derived/model].
DMA_DESCRIPTOR_OVERHEAD_BYTES = 512
# Compiler reordering window: an instruction may start before instructions issued earlier on
# its engine (filling an idle gap) but not before the one issued SCHED_WINDOW places earlier.
# nki.md §4.2 ("four independent in-order instruction streams synchronised by semaphores
# (compiler-inserted)") and §1 (affine_range iterations are independent, so the compiler may
# unroll and interleave them; sequential_range carries a dependency) [doc]; the window size
# is a [model] choice (about two unrolled iterations of a typical 8-16 instruction loop body).
SCHED_WINDOW = 32
# DMA trigger window: a transfer holds one of the DMA_ENGINES queues from the moment its
# inputs are ready (its trigger; a transfer waiting on compute is not in a queue yet) to its
# end, and may start before transfers issued earlier in program order but not before the one
# issued DMA_SCHED_WINDOW places earlier. nki.md §4.3 (16 queues, in-order within a queue;
# a transfer starts with a trigger from an engine sequencer) and §4.2 (compiler-inserted
# semaphores between in-order streams the compiler schedules) [doc]; the size, four
# transfers per queue, is a [model] choice like SCHED_WINDOW.
DMA_SCHED_WINDOW = 4 * DMA_ENGINES
# Grouping of narrow instructions (core.compute, timing.Scheduler.join). The conv1d ladder
# (calibration/anchors.json, trn1): with its output-column loop split into blocks of 64
# (step 6) the compiler issued the per-column [128, 3] multiply and reduce as wide
# instructions (512 each instead of 65,536); with the 2048-long loop (steps 0-5) it did not.
# So a narrow VectorE instruction (every operand <= GROUP_NARROW_ELEMS elements) inside an
# affine_range of at most GROUP_MAX_TRIP iterations is grouped with its copies of the other
# iterations of that loop [public measurement; the limits between 64 and 2048 iterations and
# the narrowness limit are not published: model]. The profile at step 5 shows 16,384
# tensor_reduce for 65,536 output columns whose results go to PSUM: grouped 4:1
# (GROUP_PSUM_REDUCE) [public measurement].
GROUP_MAX_TRIP = 64
GROUP_NARROW_ELEMS = 8
GROUP_PSUM_REDUCE = 4
# Dynamic-address (indirect) copies cost ~600 cycles minimum. nki.md §4.2 [doc].
DYNAMIC_COPY_MIN_CYCLES = 600


TRN1 = Target(
    name="trn1",
    # TensorE 2.8 GHz on NeuronCore-v2. nki.md §4.1 [doc: arch guide engine table].
    tensor_hz=2.8e9,
    # VectorE 1.12 GHz, 128 lanes, 1 element/cycle per partition. nki.md §4.1 [doc].
    vector_hz=1.12e9,
    # ScalarE 1.4 GHz. nki.md §4.1 [doc].
    scalar_hz=1.4e9,
    # GpSimdE 1.4 GHz. nki.md §4.1 [doc].
    gpsimd_hz=1.4e9,
    # GpSimd: 8 cores x 512-bit SIMD (16 fp32 / 32 x 16-bit), each core serving 16
    # partitions -> 1 fp32 (2 x 16-bit) element per cycle per partition per element stream;
    # each input tile and the output are separate streams through a core's load/store path
    # (core.gpsimd_cost). One stream = the documented 150 + N of iota / affine_select
    # [derived from nki.md §4.1 (core layout) and §4.2 (150 + N)].
    # NeuronCore base clock used for cycle counts: 1.4 GHz. nki.md §4.1 / §3.3 [doc].
    base_hz=1.4e9,
    # SBUF 24 MiB = 128 x 192 KiB. nki.md §4.1 [doc].
    sbuf_bytes_per_partition=192 * KIB,
    # DMA per engine 17 B/ns "peak" table -> 16 x 17 = 272 B/ns per core. nki.md §4.1 [doc,
    # uncertain vs 27.2 GB/s theoretical; the lower figure is used].
    dma_bytes_per_ns=16 * 17.0,
    # HBM 820 GB/s per chip, ~410 GB/s per core. nki.md §4.1 [doc + 3rd PR #133].
    hbm_bytes_per_ns=410.0,
    # Sustained DMA rate. The matmul tutorial publishes trn1.32xlarge latencies for its four
    # kernels at lhsT [8192,4096] x rhs [8192,8192] bf16: 51.80, 42.96, 22.07, 6.97 ms
    # (SDK docs `general/nki/tutorials/matrix_multiplication.rst`, "Performance"). The first
    # three are DMA-bound and move 5.43, 4.43 and 2.28 GB in rows of 256 B and 1 KiB; the
    # last moves 0.74 GB in 2 and 4 KiB rows: 105, 103, 103 and 106 GB/s. So trn1 sustains
    # ~104 GB/s per core, 0.38 of the 272 GB/s peak, and row size barely matters between
    # 256 B and 4 KiB (unlike the trn2 bandwidth guide's curve). Modelled as this share of
    # the peak with a small per-descriptor overhead (`dma_descriptor_bytes`): 0.42 x 272 x
    # b/(b+128) = 76 GB/s at 256 B, 102 at 1 KiB, 108 at 2 KiB, 111 at 4 KiB per row
    # [doc: published measurements, 2 parameters fitted to 4 points]. The perf guide's
    # "close to 70%" DMA utilisation caption (nki.md §4.3) names neither kernel nor peak and
    # is not used. Every HBM<->SBUF and on-chip transfer and spill pays it.
    # Peak BF16 = 128*128*2*2.8e9 = 91.75 TFLOPS. nki.md §4.1 [derived].
    peak_flops_bf16=128 * 128 * 2 * 2.8e9,
    # VectorE perf mode exists only on trn2. nki.md §4.2 [doc].
    vector_perf_mode=False,
    # DMA transpose on trn1 (`load_transpose2d`) is "much slower" than a copy; modelled at 25%
    # of copy throughput. nki.md §4.3 [doc, factor is a model choice].
    # VectorE and GpSimdE share SBUF access on trn1 (nki.md §4.1 "engine port conflicts"
    # [doc: arch guides]): the streaming parts of their instructions never overlap [model].
    vector_gpsimd_shared_port=True,
)

TRN2 = Target(
    name="trn2",
    # TensorE 2.4 GHz on NeuronCore-v3. nki.md §4.1 [doc].
    tensor_hz=2.4e9,
    # VectorE 0.96 GHz. nki.md §4.1 [doc].
    vector_hz=0.96e9,
    # ScalarE 1.2 GHz. nki.md §4.1 [doc].
    scalar_hz=1.2e9,
    # GpSimdE 1.2 GHz. nki.md §4.1 [doc].
    gpsimd_hz=1.2e9,
    # Same GpSimd core layout as trn1 (nki.md §4.1 [doc]); see TRN1.
    # Base clock 1.2 GHz. nki.md §3.3 (`neuroncore_cycle_count`) [doc].
    base_hz=1.2e9,
    # SBUF 128 x 224 KiB raw; nki-library uses 224 KiB - 16 KiB as usable. nki.md §1.9 / §4.1
    # [derived/uncertain].
    sbuf_bytes_per_partition=(224 - 16) * KIB,
    # DMA 23 B/ns per engine x 16 = 368 B/ns per core. nki.md §4.1 [doc, uncertain].
    dma_bytes_per_ns=16 * 23.0,
    # HBM 2.9 TB/s per chip, ~362 GB/s per physical core. nki.md §4.1 [doc/derived].
    hbm_bytes_per_ns=362.0,
    # No sustained-utilisation figure is documented for trn2 (the DMA bandwidth guide says
    # >= 4 KiB per row saturates); only the descriptor overhead applies. nki.md §4.3 [doc].
    # Peak BF16 = 128*128*2*2.4e9 = 78.6 TFLOPS. nki.md §4.1 [derived].
    peak_flops_bf16=128 * 128 * 2 * 2.4e9,
    # trn2 VectorE perf mode: tensor_copy/tensor_scalar 4x SBUF->SBUF 16-bit contiguous,
    # 2x when one side is PSUM; tensor_tensor 2x when both inputs SBUF and all 16-bit.
    # nki.md §4.2 [doc].
    vector_perf_mode=True,
    # trn2 lifts the VectorE/GpSimdE port sharing. nki.md §4.1 [doc: arch guides].
    vector_gpsimd_shared_port=False,
    # trn2 transposing DMA HBM->SBUF reaches up to ~90% of copy throughput. nki.md §4.3 [doc].
)

# ---- trn3 (Trainium3, NeuronCore-v4) ---------------------------------------------------
# Sources, AWS Neuron documentation (aws-neuron/aws-neuron-sdk):
#   [T3]  "Trainium3 Architecture Guide for NKI" (nki/guides/architecture/trainium3_arch.rst)
#   [T3H] "Trainium3 Architecture" overview (about-neuron/arch/neuron-hardware/trainium3.rst)
#   [MXG] "MXFP Matrix Multiplication with NKI" (nki/deep-dives/mxfp-matmul.rst)
#   [QMX] nki.isa.quantize_mx API page; [MMX] nki.isa.nc_matmul_mx API page
# Engine costs use the trn2 cost formulas (core.py / timing.py) with these parameters.

# NeuronCores per Trainium3 device: 8 (NeuronCore-v4). [T3]
TRN3_CORES_PER_DEVICE = 8
# Device HBM bandwidth 4.7 TB/s over 4 stacks (144 GiB). [T3] ([T3H] gives 4.9 TB/s; the NKI
# guide's lower figure is used.)
TRN3_DEVICE_HBM_BYTES_PER_NS = 4700.0
# 128 DMA engines per device, i.e. 16 per NeuronCore like trn1/trn2 (DMA_ENGINES). [T3]
TRN3_DEVICE_DMA_ENGINES = 128
# Device DMA bandwidth 4.9 TB/s. [T3H]
TRN3_DEVICE_DMA_BYTES_PER_NS = 4900.0
# MX scaling group: 32 elements along the contraction axis = 8 partitions x 4 packed elements
# (one x4 element) per partition; one 8-bit (e8m0) scale per group. [T3], [MXG], [QMX]
MX_GROUP_PARTITIONS = 8
MX_GROUP_ELEMS = 4
MX_GROUP_SIZE = MX_GROUP_PARTITIONS * MX_GROUP_ELEMS
# Scales of the groups in one 32-partition SBUF quadrant sit in that quadrant's first
# 32 / 8 = 4 partitions. [T3] (scale layout figure), [MXG] ("Scale Tensor")
SBUF_QUADRANT_PARTITIONS = 32
# An MX matmul runs at 4x the BF16/FP16 throughput: each PE multiplies-accumulates four x4
# element pairs per cycle (contraction 128 x4 = 512 in the time of a 128-row BF16 pass).
# [T3] ("Quad-MXFP8/MXFP4 Matmul Performance"; 315 MXFP8 vs 79 BF16 TFLOPS), [MXG]
MX_MATMUL_SPEEDUP = 4
# QuantizeMX on VectorE processes four input elements per partition per cycle ("4x Vector
# performance mode"). [T3] ("MX data-type Quantization")
QUANTIZE_MX_ELEMS_PER_CYCLE = 4

TRN3 = Target(
    name="trn3",
    # TensorE 2.4 GHz. [T3] (Compute Engine Specifications table)
    tensor_hz=2.4e9,
    # VectorE 1.2 GHz. [T3] The table's wider data path (512 BF16/FP16/FP8 or 256 other
    # elements per cycle) is not modelled beyond trn2's perf-mode factors (core.py).
    vector_hz=1.2e9,
    # ScalarE 1.2 GHz. [T3] (256 BF16/FP16/FP8 elements per cycle not modelled, as VectorE.)
    scalar_hz=1.2e9,
    # GpSimdE 1.2 GHz, 128 elements in/out per cycle for all types. [T3]
    gpsimd_hz=1.2e9,
    # GpSimd core layout: not documented for NeuronCore-v4; carried over from trn2 (the
    # guide lists GpSimd among the engines without a layout change).
    # Base clock for cycle counts: not documented for trn3; the engines run at 1.2 GHz [T3],
    # like trn2's base clock, so trn2's 1.2 GHz is carried over.
    base_hz=1.2e9,
    # SBUF 32 MiB per NeuronCore-v4 = 128 x 256 KiB [T3]; usable size: trn2's 16 KiB
    # per-partition reserve (nki.md §1.9) carried over, as no trn3 figure is documented.
    sbuf_bytes_per_partition=(256 - 16) * KIB,
    # DMA: 4.9 TB/s per device over 128 engines = 38.3 B/ns per engine, x 16 per core
    # [T3H], [T3] [derived].
    dma_bytes_per_ns=DMA_ENGINES * TRN3_DEVICE_DMA_BYTES_PER_NS / TRN3_DEVICE_DMA_ENGINES,
    # HBM 4.7 TB/s per device / 8 cores = 587.5 B/ns per core. [T3] [derived]
    hbm_bytes_per_ns=TRN3_DEVICE_HBM_BYTES_PER_NS / TRN3_CORES_PER_DEVICE,
    # No sustained-utilisation figure is documented for trn3; as trn2, only the descriptor
    # overhead applies (trn2's per-descriptor bytes carried over).
    # Peak BF16 = 128*128*2*2.4e9 = 78.6 TFLOPS per core; the guide gives 79. [T3] [derived]
    # (FP32 at 1/4 of it, 20 TFLOPS [T3], matches MATMUL_FP32_FACTOR.)
    peak_flops_bf16=128 * 128 * 2 * 2.4e9,
    # Peak MXFP8/MXFP4 = 4x BF16 = 314.6 TFLOPS per core; the guide gives 315. [T3] [derived]
    peak_flops_mx=MX_MATMUL_SPEEDUP * 128 * 128 * 2 * 2.4e9,
    # VectorE perf modes: not re-documented for NeuronCore-v4; trn2's carried over.
    vector_perf_mode=True,
    # VectorE/GpSimdE port sharing: lifted since trn2, no change documented; carried over.
    vector_gpsimd_shared_port=False,
    # DMA transpose efficiency: not documented for trn3; trn2's ~90% carried over.
    # MX matmul (nisa.nc_matmul_mx) and QuantizeMX (nisa.quantize_mx) exist only here:
    # "Available only on NeuronCore-v4 and newer". [QMX], [MMX]
    mx=True,
)

TARGETS = {"trn1": TRN1, "trn2": TRN2, "trn3": TRN3, "inf2": TRN1, "gen2": TRN1,
           "gen3": TRN2, "gen4": TRN3}


def get_target(name):
    """Target by name ('trn1', 'trn2' or 'trn3'; 'inf2'/'gen2' alias trn1, 'gen3' trn2,
    'gen4' trn3)."""
    t = TARGETS.get(str(name).lower())
    if t is None:
        raise ValueError("unknown target %r (expected trn1, trn2 or trn3)" % (name,))
    return t
