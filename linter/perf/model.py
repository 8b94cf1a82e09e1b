"""Predicted kernel time of a tile config on a device at a batch size (pure Python).

The model follows the shape of Triton's old ``matmul_perf_model.estimate_matmul_time``
(compute vs. loads, device facts passed in, a breakdown returned instead of printed) and adds what
matters for fused MoE. Every coefficient named ``c.x`` below is data
(``data/perf_model/*.json``, see :mod:`tilefit.perf.coefficients`). Terms, with their source:

**Problem and padding** (vLLM/SGLang ``moe_align_block_size``). Under uniform top-k routing an
expert gets ``X ~ Binomial(M, top_k/E)`` rows, padded to ``ceil(X / BM)`` blocks of BM rows;
``blocks_m = E * E[ceil(X / BM)]`` (``E_act = E (1 - (1 - top_k/E)^M)`` experts are touched at
all). Padded rows cost tensor time but no loads (masked). Dense GEMMs have one "expert" and
M rows.

**Grid and wave quantisation.** ``programs = blocks_m * ceil(N / BN)``; the busiest SM runs
``ceil(programs / sm_count)`` of them (device_db ``sm_count``), ``occ`` at a time, in
``rounds = ceil(per_sm / occ)`` rounds.

**Occupancy** (CUDA occupancy calculator rules): programs per SM are limited by shared memory
(the estimator's bytes plus ``reserved_smem_per_block`` against ``smem_per_sm``), threads
(``num_warps * warp_size`` against ``max_threads_per_sm``), registers and ``max_blocks_per_sm``.
**Registers** are estimated per thread as the fp32 accumulator tile ``BM*BN / threads``, plus
operand fragments held in registers (mma.sync; wgmma reads operands from shared memory), plus
``c.base_regs_per_thread``, rounded up to 8 and capped at ``max_regs_per_thread`` and at
``regs_per_block / threads``; what is above the cap spills (``c.spill_penalty_per_32_regs``).

**Tensor throughput** (device_db ``tensor_tflops`` by dtype: fp8, int8, fp16 with fp32
accumulation for 16-bit and weight-only paths). Per SM, ``peak / sm_count * c.mma_efficiency``,
scaled by ``min(1, resident warps / c.tensor_subpartitions)``. Tiles smaller than the MMA
instruction are padded to it (16 rows for mma.sync/MFMA, 64 for wgmma and tcgen05). On sm_90,
BM < 64 falls back to mma.sync (``c.mma_v2_on_wgmma``) unless the fp8 kernel swaps A and B
(:mod:`tilefit.serving.launch`: BM < 64 <= BN), which makes BN the MMA's row count.

**Warp layout and shared memory** (Triton's ``AccelerateMatmul``, :func:`warp_layout`): warps are
laid over the MMA tile as the pass does; warps beyond a narrow tile's 16 x 8 pieces replicate its
MMA work, and each column of warps re-reads the MMA's A operand (each row of warps, or warp group,
its B) from shared memory every K iteration, at ``c.smem_bytes_per_clk_per_sm``: the MMA takes at
least that long.

**L2 -> SM traffic** per K iteration: the real rows of the A tile plus the B tile, at
``c.l2_bytes_per_clk_per_sm * boost_clock * c.l2_efficiency`` per SM.

**Pipelining depth** (Triton's software pipeliner keeps ``num_stages - 1`` loads in flight):
a stage's load completes ``c.load_latency_ns`` plus its own transfer time after it is issued,
so each iteration waits at least ``(latency + transfer) / max(num_stages - 1, 1)``; one stage
has no overlap at all. The SM takes the largest of its programs' tensor work (plus
``c.iter_overhead_cycles`` per iteration), their L2 traffic (and tile stores), both counted as
work (a partial last round of programs is not a full one), and the latency chain of its rounds;
a program adds one latency to fill the pipeline and an epilogue, which co-resident programs hide
for each other after the first round.

**The launch's fill** (eighth pass): the first wave's resident programs issue their
``num_stages - 1`` prologue stages at once and wait for them, sharing the SM's part of the DRAM
bandwidth, before any MMA starts; ``c.pipeline_fill_share`` times those bytes over that share is
added once per launch. It is what a deeper BLOCK_SIZE_K costs where the SM runs one wave of short
K loops (M <= 64: the BK 256 / BK 128 pairs of the H200 sweep, ``bench/moe_bk_bias.py --fit``).

**DRAM roofline** (device_db ``memory_bandwidth_gbps`` times ``c.dram_efficiency``): the weights
of the touched experts, re-read once per group of ``GROUP_SIZE_M`` M blocks when an expert's
weights do not stay in ``c.l2_reuse_fraction`` of the L2 (``l2_bytes``), plus A once and C once.
Rows of a tile are contiguous along K for BK elements; a row segment shorter than
``c.dram_segment_bytes`` costs a whole segment (DRAM bursts and L2 lines are 64-128 bytes).
A is re-read too: the programs in flight (``sms x occupancy``) cover ``min(GROUP_SIZE_M, in
flight)`` M blocks and as many N tiles as leave room for, so a group's A rows are visited once per
sweep of ``ceil(N tiles / tiles in flight)``; they come from DRAM again in proportion to how far
the group's A rows (``G x BM x K``) exceed the L2's reused fraction. This is what makes a large
``GROUP_SIZE_M`` lose on few experts with a wide N (Mixtral at M = 4096: G = 64 is 7-12 %
slower than G = 16 on the H200) while it saves B re-reads when an expert has many M blocks.
The bandwidth is capped by Little's law: resident programs x ``(num_stages - 1)`` stages in
flight x bytes per stage, over ``c.load_latency_ns`` (few or shallow programs cannot keep enough
loads in flight to saturate DRAM); the cap meets the roofline softly (a 2-norm: loaded latency
grows near saturation). Weights are re-read once per *expected* group of ``GROUP_SIZE_M`` M
blocks of an expert (not its ceiling). Registers per accumulator element:
``c.accumulator_reg_factor``.

**Total**: ``c.launch_overhead_us + (t_sm^p + t_dram^p)^(1/p)`` with ``p = c.overlap_p``: a soft
roofline (p = infinity would be the classic ``max``; real kernels overlap memory and compute
imperfectly).

Devices with missing facts fall back to ``c.default_*``. Nothing here imports torch or triton.

**Checks** with the default (unfitted) coefficients: the 36 H200 times of
``shared/docs/perf_reference.md`` are ordered right in 37 of 40 pairs that differ by more than
2 % (``tests/test_perf_model.py``); on an H200 sweep of every config that fits sm_89 (Qwen3-30B-A3B
gate/up, fp8 and bf16, 6 batch sizes, ``bench/bench_fix.py --sweep``) the rank correlation with
the measured times is about 0.83 per batch size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from tilefit.serving.launch import swap_ab_tile, swaps_ab

from .coefficients import Coefficients, load_coefficients
from .shapes import GemmShape

# dtype path -> device_db tensor_tflops field(s), first known wins; fp32 runs tl.dot as TF32
_PEAK_FIELD = {
    "fp8_w8a8": ("fp8", "fp16_fp32acc"),
    "int8_w8a8": ("int8", "fp16_fp32acc"),
    "bf16": ("fp16_fp32acc", "fp16"),
    "fp16": ("fp16_fp32acc", "fp16"),
    "int8_w8a16": ("fp16_fp32acc", "fp16"),
    "int4_w4a16": ("fp16_fp32acc", "fp16"),
    "fp32": ("fp16_fp32acc", "fp16"),
}
_PEAK_SCALE = {"fp32": 0.5}

# rows of one MMA instruction (per warp group for wgmma / per CTA pair for tcgen05)
_MMA_ROWS = {"wgmma": 64, "tcgen05": 64, "mma_v2": 16, "mfma": 16, "wmma": 16, "fma": 1}


@dataclass(frozen=True)
class Prediction:
    """Predicted time in microseconds and its parts (all for the busiest SM)."""

    time_us: float
    sm_us: float  # per-SM time: rounds x per-program time
    dram_us: float  # DRAM roofline
    compute_us: float  # tensor time of the busiest SM
    l2_us: float  # L2 -> SM traffic time of the busiest SM
    latency_us: float  # load latency the pipeline leaves exposed on the busiest SM
    launch_us: float
    programs: int
    programs_per_sm: int
    occupancy: int  # programs resident per SM
    occupancy_limit: str  # smem, threads, regs, blocks or grid
    rounds: int
    padding: float  # real rows / computed rows
    regs_per_thread: int
    spilled_regs: int
    smem_bytes: int | None
    mma: str
    k_iterations: int
    bound: str  # which term dominates: compute, l2, latency or dram

    def as_dict(self) -> dict:
        return asdict(self)


def _config_values(config: Mapping, vendor: str | None) -> tuple[int, int, int, int, int, int]:
    bm = int(config["BLOCK_SIZE_M"])
    bn = int(config["BLOCK_SIZE_N"])
    bk = int(config["BLOCK_SIZE_K"])
    g = config.get("GROUP_SIZE_M", 1)
    w = config.get("num_warps", 4)
    s = config.get("num_stages", 2 if vendor == "AMD" else 3)
    return bm, bn, bk, int(g) if isinstance(g, int) and g > 0 else 1, int(w), int(s)


def peak_tflops(device, dtype: str, c: Coefficients) -> float:
    tt = getattr(device, "tensor_tflops", None)
    if tt is not None:
        for name in _PEAK_FIELD.get(dtype, ("fp16_fp32acc", "fp16")):
            v = getattr(tt, name, None)
            if v:
                return float(v) * _PEAK_SCALE.get(dtype, 1.0)
    return c["default_tensor_tflops"] * _PEAK_SCALE.get(dtype, 1.0)


_SMEM: dict[tuple, tuple] = {}  # what _smem_default reads -> (family, model, its answer)


def _smem_default(config: Mapping, shape: GemmShape, device) -> int | None:
    """Shared memory from the analytic model when the caller has no estimator. Memoised on what
    it reads (the shape's kernel, dtype path, block shape and engine, the arch, the config's
    values), checked against the family and model it asked (a registry change or a new
    calibration gives new objects): a search predicts the same candidates at many batch sizes."""
    try:
        from tilefit import kernels
        from tilefit.kernels.spec import make_spec
        from tilefit.smem.analytic import ModelError, load_model
    except ImportError:  # pragma: no cover
        return None
    bm, bn, bk, g, w, s = _config_values(config, device.vendor)
    family = kernels.find(shape.kernel)
    if family is None:
        return None
    try:
        model = load_model()
    except (ModelError, ValueError, KeyError):
        return None
    key = (shape.kernel, shape.dtype, shape.block_shape, shape.engine, device.arch, bm, bn, bk, g, w, s)
    hit = _SMEM.get(key)
    if hit is not None and hit[0] is family and hit[1] is model:
        return hit[2]
    quant, block = family.default_quant(shape.dtype, shape.block_shape)
    swap = family.can_swap_ab and swaps_ab(shape.engine, shape.dtype, device.arch, bm, bn)
    try:
        spec = make_spec(shape.kernel, shape.dtype,
                         {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g},
                         num_warps=w, num_stages=s, quant=quant, block_shape=block, swap_ab=swap)
        answer = model.estimate(spec, device.arch).shared_bytes
    except (ModelError, ValueError, KeyError):
        answer = None
    if len(_SMEM) > 100000:
        _SMEM.clear()
    _SMEM[key] = (family, model, answer)
    return answer


def _can_swap(kernel: str) -> bool:
    """Whether the kernel has the swap of A and B (its family's ``swap_ab``)."""
    from tilefit import kernels

    family = kernels.find(kernel)
    return family is not None and family.can_swap_ab


def _block_scaled(kernel: str) -> bool:
    """Whether the kernel applies block scales in its K loop (its family runs ``block`` quantisation)."""
    from tilefit import kernels

    family = kernels.find(kernel)
    return family is not None and "block" in family.quant_modes


def warp_layout(kind: str, rows: int, cols: int, warps: int) -> tuple[int, int, int]:
    """(warps along M, warps along N, MMA instruction N) for a ``rows`` x ``cols`` dot on
    ``warps`` warps, as Triton's AccelerateMatmul pass assigns them (``warpsPerTileV2`` /
    ``warpsPerTileV3`` and the wgmma instruction shape): the pass keeps doubling one side until
    every warp has a place, so a tile with fewer 16 x 8 (mma.sync) pieces than warps is
    replicated, and a narrow tile on two warp groups runs narrower wgmma instructions."""
    warps = max(1, warps)
    if kind == "wgmma":
        m_warps = max(rows // 16, 1)
        n_warps = max(warps // m_warps, 1)
        max_n = max(cols // n_warps, 8)
        instr_n = 8
        while instr_n * 2 <= min(max_n, 256, max(cols, 8)):
            instr_n *= 2
        wm, wn = 4, 1
        while wm * wn < warps:
            if rows > 16 * wm:
                wm *= 2
            else:
                wn *= 2
        return wm, wn, instr_n
    wm, wn = 1, 1
    while wm * wn < warps:
        if rows // 16 // wm >= cols // 16 // wn:
            if wm < rows // 16:
                wm *= 2
            else:
                wn *= 2
        else:
            wn *= 2
    return wm, wn, 8


def _ceil8(x: float) -> int:
    return int(math.ceil(x / 8.0)) * 8


@dataclass(frozen=True)
class _Static:
    """What a prediction needs that does not depend on the config (one per shape and device)."""

    sms: int
    clock: float
    bw: float
    l2_size: float
    warp_size: int
    a_b: float
    b_b: float
    c_b: float
    rows: int
    active: float
    per_expert: float
    mma: str
    fp8_swap_kernel: bool
    block_scales: bool  # block-quantised dot: scaled per K iteration, not chained into the accumulator
    scale_cycles: float
    peak_per_sm: float  # FLOP/s per SM after c.mma_efficiency
    max_regs: int
    regs_per_block: int
    max_blocks: int
    max_threads_sm: int
    regs_per_sm: int
    smem_per_sm: int | None
    reserved: int
    l2_rate: float
    latency: float
    t_ovh: float
    epilogue: float
    a_rows: int
    route_p: float
    mma_v2_on_wgmma: float
    base_regs: float
    acc_regs: float
    spill_penalty: float
    subpartitions: float
    l2_reuse: float
    overlap_p: float
    launch_us: float
    segment: float
    smem_rate: float  # shared-memory bytes per second per SM
    fill_share: float  # c.pipeline_fill_share over the SM's share of DRAM bandwidth (s per byte)
    tile_key: tuple = ()  # the facts above that _tile_terms reads (its memo key)
    # the shape's sizes the config-dependent terms read (copied: one attribute read, not two)
    M: int = 0
    n: int = 0
    k: int = 0
    experts: int = 1
    # memos: (BM, BN, BK) -> _block_terms; (BM, BN, BK) -> _shape_block_terms (shared by every
    # _Static of one shape: the ranking devices); (BM, BN, BK, warps, bytes) -> _tile_terms (shared
    # by every _Static of one tile_key: the batch sizes of a device and dtype path)
    blocks: dict = field(default_factory=dict, compare=False, repr=False)
    shape_blocks: dict = field(default_factory=dict, compare=False, repr=False)
    tiles: dict = field(default_factory=dict, compare=False, repr=False)
    # config-free parts of the DRAM terms, each the very expression _predict used to evaluate
    l2_reused: float = 0.0  # l2_size * l2_reuse
    expert_w: float = 0.0  # n * k * b_b
    w_all: float = 0.0  # active * expert_w
    miss: float = 0.0  # min(1.0, expert_w / l2_reused)
    a_all: float = 0.0  # a_rows * k * a_b
    c_all: float = 0.0  # rows * n * c_b
    inv_bw: float = 0.0  # 1.0 / bw
    fixed: float = 0.0  # latency + epilogue


_STATIC: dict[tuple, tuple] = {}
_BLOCKS: dict[tuple, float] = {}
_SHAPE_BLOCKS: dict[GemmShape, dict] = {}  # shape -> that shape's _Static.shape_blocks


def expected_blocks(M: int, p: float, bm: int) -> float:
    """E[ceil(X / bm)] for X ~ Binomial(M, p): the padded blocks one expert gets when M tokens
    each pick it with probability p (``moe_align_block_size`` pads every expert's rows to BM)."""
    key = (M, p, bm)
    hit = _BLOCKS.get(key)
    if hit is not None:
        return hit
    mean = M * p
    sd = math.sqrt(max(M * p * (1.0 - p), 0.0))
    if p >= 1.0 or sd == 0.0:
        value = float(math.ceil(mean / bm - 1e-9))
    elif mean > 4000:
        value = mean / bm + 0.5  # ceil adds half a block on average when the spread is wide
    else:
        lo = max(0, int(mean - 10 * sd))
        hi = min(M, int(mean + 10 * sd) + bm + 1)
        lp, lq = math.log(p), math.log1p(-p)
        lgm = math.lgamma(M + 1)
        value = 0.0
        for x in range(max(lo, 1), hi + 1):
            pmf = math.exp(lgm - math.lgamma(x + 1) - math.lgamma(M - x + 1) + x * lp + (M - x) * lq)
            value += pmf * ((x + bm - 1) // bm)
    if len(_BLOCKS) > 100000:
        _BLOCKS.clear()
    _BLOCKS[key] = value
    return value


def _static(shape: GemmShape, device, c: Coefficients) -> _Static:
    key = (shape, device.key, id(c))
    hit = _STATIC.get(key)
    if hit is not None and hit[0] is c and hit[1] is device:
        return hit[2]
    base = _device_static(device, c, shape.kernel, shape.dtype, shape.block_shape is not None)
    rows = max(shape.rows, 1)
    if shape.experts > 1:
        hit_p = min(1.0, shape.top_k / shape.experts)
        active = shape.experts * (1.0 - (1.0 - hit_p) ** shape.M)
        active = max(1.0, min(float(shape.experts), active, float(rows)))
    else:
        active = 1.0
    a_rows = shape.a_rows_unique if shape.a_rows_unique is not None else rows
    expert_w = shape.n * shape.k * base.b_b
    shape_blocks = _SHAPE_BLOCKS.get(shape)
    if shape_blocks is None:
        if len(_SHAPE_BLOCKS) > 4096:
            _SHAPE_BLOCKS.clear()
        shape_blocks = _SHAPE_BLOCKS[shape] = {}
    st = _with_fields(base, rows=rows, active=active, per_expert=rows / active, a_rows=a_rows,
                      route_p=min(1.0, shape.top_k / shape.experts) if shape.experts > 1 else 1.0,
                      M=shape.M, n=shape.n, k=shape.k, experts=shape.experts, blocks={}, shape_blocks=shape_blocks,
                      expert_w=expert_w, w_all=active * expert_w, miss=min(1.0, expert_w / base.l2_reused),
                      a_all=a_rows * shape.k * base.a_b, c_all=rows * shape.n * base.c_b)
    if len(_STATIC) > 4096:
        _STATIC.clear()
    _STATIC[key] = (c, device, st)
    return st


def _with_fields(base: _Static, **changes) -> _Static:
    """``dataclasses.replace(base, **changes)`` without running the 50-field ``__init__`` again
    (``_Static`` has no ``__post_init__`` and no ``init=False`` field: the same fields, the same
    values; a fix search makes one per shape and ranking device)."""
    st = object.__new__(_Static)
    fields = st.__dict__
    fields.update(base.__dict__)
    fields.update(changes)
    return st


_DEVICE_STATIC: dict[tuple, tuple] = {}


def _device_static(device, c: Coefficients, kernel: str, dtype: str, block_shaped: bool) -> _Static:
    """The part of :func:`_static` that no size of the shape changes (the device's facts, the
    coefficients, the kernel's dtype path), memoised: :func:`_static` fills in the shape's."""
    key = (device.key, id(c), kernel, dtype, block_shaped)
    hit = _DEVICE_STATIC.get(key)
    if hit is not None and hit[0] is c and hit[1] is device:
        return hit[2]
    sms = device.sm_count or int(c["default_sm_count"])
    clock = (device.boost_clock_mhz or c["default_clock_mhz"]) * 1e6
    from tilefit.dtypes import operand_bytes

    a_b, b_b, c_b = operand_bytes(dtype)
    st = _Static(
        sms=sms, clock=clock,
        bw=(device.memory_bandwidth_gbps or c["default_bandwidth_gbps"]) * 1e9 * c["dram_efficiency"],
        l2_size=device.l2_bytes or c["default_l2_bytes"],
        warp_size=device.warp_size or 32,
        a_b=a_b, b_b=b_b, c_b=c_b, rows=0, active=0.0, per_expert=0.0,
        mma=device.mma or "mma_v2",
        fp8_swap_kernel=dtype == "fp8_w8a8" and _can_swap(kernel),
        block_scales=block_shaped and dtype in ("fp8_w8a8", "int8_w8a8") and _block_scaled(kernel),
        scale_cycles=c["block_scale_cycles_per_kelement"] / 1024.0,
        peak_per_sm=peak_tflops(device, dtype, c) * 1e12 / sms * c["mma_efficiency"],
        max_regs=device.max_regs_per_thread or 255,
        regs_per_block=device.regs_per_block or 65536,
        max_blocks=device.max_blocks_per_sm or 32,
        max_threads_sm=device.max_threads_per_sm or 2048,
        regs_per_sm=device.regs_per_sm or 65536,
        smem_per_sm=device.smem_per_sm,
        reserved=device.reserved_smem_per_block or 0,
        l2_rate=c["l2_bytes_per_clk_per_sm"] * clock * c["l2_efficiency"],
        latency=c["load_latency_ns"] * 1e-9,
        t_ovh=c["iter_overhead_cycles"] / clock,
        epilogue=c["epilogue_latency_ns"] * 1e-9,
        a_rows=0,
        route_p=1.0,
        mma_v2_on_wgmma=c["mma_v2_on_wgmma"],
        base_regs=c["base_regs_per_thread"],
        acc_regs=c["accumulator_reg_factor"],
        spill_penalty=c["spill_penalty_per_32_regs"],
        subpartitions=c["tensor_subpartitions"],
        l2_reuse=c["l2_reuse_fraction"],
        overlap_p=c["overlap_p"],
        launch_us=c["launch_overhead_us"],
        segment=c["dram_segment_bytes"],
        smem_rate=c["smem_bytes_per_clk_per_sm"] * clock,
        fill_share=c["pipeline_fill_share"] * sms / ((device.memory_bandwidth_gbps or c["default_bandwidth_gbps"])
                                                     * 1e9 * c["dram_efficiency"]),
    )
    tile_key = (st.mma, st.fp8_swap_kernel, st.a_b, st.b_b, st.warp_size, st.block_scales, st.base_regs, st.acc_regs,
                st.max_regs, st.regs_per_block, st.spill_penalty, st.max_blocks, st.max_threads_sm, st.regs_per_sm,
                st.smem_per_sm, st.reserved, st.mma_v2_on_wgmma)
    tiles = _TILES.get(tile_key)
    if tiles is None or len(tiles) > 200000:
        tiles = _TILES[tile_key] = {}
    st = replace(st, tile_key=tile_key, tiles=tiles, l2_reused=st.l2_size * st.l2_reuse, inv_bw=1.0 / st.bw,
                 fixed=st.latency + st.epilogue)
    if len(_DEVICE_STATIC) > 4096:
        _DEVICE_STATIC.clear()
    _DEVICE_STATIC[key] = (c, device, st)
    return st



_TILES: dict[tuple, dict] = {}  # tile_key -> that _Static.tiles


def _tile_terms(st: _Static, bm: int, bn: int, bk: int, warps: int, smem_bytes: int | None) -> tuple:
    """What a prediction takes from the tile, the warps and the shared memory alone (the MMA path,
    the warp layout, registers, occupancy): the same for every batch size of a device and dtype
    path, so memoised on the device's and path's facts (``st.tile_key``: ``st.tiles`` is that
    key's memo). The ranking predicts each candidate at many batch sizes."""
    key = (bm, bn, bk, warps, smem_bytes)
    hit = st.tiles.get(key)
    if hit is not None:
        return hit
    # -- MMA path
    mma = st.mma
    path_eff = 1.0
    swap = mma == "wgmma" and st.fp8_swap_kernel and swap_ab_tile(bm, bn)
    mm, nn = (bn, bm) if swap else (bm, bn)
    inst_rows = _MMA_ROWS.get(mma, 16)
    label = mma
    if mma == "wgmma" and mm < 64:
        path_eff = st.mma_v2_on_wgmma
        inst_rows = 16
        label = "mma_v2 (on sm_90)"
    elif swap:
        label = "wgmma (swap-AB)"
    # warps over the MMA tile as Triton lays them out; warps beyond the tile replicate its work
    wm, wn, cols = warp_layout("wgmma" if label.startswith("wgmma") else "mma_v2", mm, nn, warps)
    rows_cov = max(mm, inst_rows, 16 * wm)
    cols_cov = max(nn, 8, cols * wn)
    flops_iter = 2.0 * rows_cov * cols_cov * bk
    # operand reads from shared memory per K iteration: each column of warps reads the MMA's A
    # rows, each row of warps (warp group on wgmma) its B columns
    mma_a_b, mma_b_b = (st.b_b, st.a_b) if swap else (st.a_b, st.b_b)
    b_readers = wm / 4.0 if label.startswith("wgmma") else float(wm)
    smem_read = bk * (rows_cov * mma_a_b * wn + cols_cov * mma_b_b * max(1.0, b_readers))

    # -- registers
    threads = warps * st.warp_size
    acc = bm * bn / threads
    if st.block_scales:  # the scaled dot result lives beside the accumulator
        acc *= 2.0
    operands_in_smem = label.startswith("wgmma") or mma == "tcgen05"
    frags = 0.0 if operands_in_smem else (bm * bk * st.a_b + bn * bk * st.b_b) / 4.0 / threads
    regs = _ceil8(st.base_regs + acc * st.acc_regs + frags)
    cap = min(st.max_regs, st.regs_per_block // max(threads, 1))
    cap = max(8, cap - cap % 8)
    spilled = max(0, regs - cap)
    regs_alloc = min(regs, cap)
    spill_factor = 1.0 + st.spill_penalty * spilled / 32.0

    # -- occupancy
    occupancy, limit_name = st.max_blocks, "blocks"
    for name, value in (("threads", st.max_threads_sm // max(threads, 1)),
                        ("regs", st.regs_per_sm // max(regs_alloc * threads, 1)),
                        ("smem", st.smem_per_sm // (smem_bytes + st.reserved) if smem_bytes and st.smem_per_sm
                         else None)):
        if value is not None and value < occupancy:
            occupancy, limit_name = value, name
    occupancy = max(1, occupancy)
    out = (swap, label, path_eff, flops_iter, smem_read, regs, spilled, spill_factor, occupancy, limit_name)
    st.tiles[key] = out
    return out


def predict_time(config: Mapping, shape: GemmShape, device, coefficients: Coefficients | None = None,
                 smem_bytes: int | None = None) -> float:
    """Only the predicted microseconds of :func:`predict` (what ranking needs; no breakdown)."""
    return predict(config, shape, device, coefficients, smem_bytes, _time_only=True)


def predict(config: Mapping, shape: GemmShape, device, coefficients: Coefficients | None = None,
            smem_bytes: int | None = None, *, smem: Callable | None = None, _time_only: bool = False):
    """Predicted time of ``config`` (an entry dict) for ``shape`` on ``device`` (a device_db Device).

    ``smem_bytes`` is the block's shared memory as the estimator computes it; without it,
    ``smem(config, device)`` is asked, else the analytic model.
    """
    c = coefficients or load_coefficients(device)
    bm, bn, bk, group, warps, stages = _config_values(config, getattr(device, "vendor", None))
    if smem_bytes is None:
        smem_bytes = smem(config, device) if smem is not None else _smem_default(config, shape, device)
    st = _static(shape, device, c)
    return _predict(st, bm, bn, bk, group, warps, stages, smem_bytes, _time_only)


def time_predictor(shape: GemmShape, device, coefficients: Coefficients) -> "TimePredictor":
    """``f(config, smem_bytes)``: :func:`predict_time` of ``config`` for ``shape`` on ``device``
    with these coefficients, the shape's and device's part (``_static``) looked up once (what a
    ranking asks for many configs of one shape and device). The same float operations, in the
    same order, as :func:`predict`: the same numbers."""
    return TimePredictor(_static(shape, device, coefficients), getattr(device, "vendor", None))


class TimePredictor:
    """:func:`time_predictor`'s answer: called with a config and its shared memory, or (``of_key``)
    with the config's values as the fix planner keys them (``cfg_key``: BM, BN, BK, GROUP_SIZE_M,
    num_warps, num_stages, an absent launch option None), which skips reading the config's dict."""

    __slots__ = ("st", "vendor", "default_stages")

    def __init__(self, st: _Static, vendor: str | None):
        self.st = st
        self.vendor = vendor
        self.default_stages = 2 if vendor == "AMD" else 3  # _config_values' default

    def __call__(self, config: Mapping, smem_bytes: int | None) -> float:
        bm, bn, bk, group, warps, stages = _config_values(config, self.vendor)
        return _predict(self.st, bm, bn, bk, group, warps, stages, smem_bytes, True)

    def of_key(self, key: tuple, smem_bytes: int | None) -> float:
        """The same number as calling it with the config whose ``cfg_key`` is ``key`` (the values
        :func:`_config_values` reads, with its defaults for the absent ones)."""
        bm, bn, bk, g, w, s = key
        return _predict(self.st, int(bm), int(bn), int(bk), int(g) if isinstance(g, int) and g > 0 else 1,
                        4 if w is None else int(w), int(self.default_stages if s is None else s), smem_bytes, True)


def _shape_block_terms(st: _Static, bm: int, bn: int, bk: int) -> tuple:
    """What :func:`_block_terms` takes from the block sizes and the shape alone (the padding, the
    grid, the K loop, a stage's bytes): the same on every device (``st.shape_blocks``, shared by
    the ``_Static`` of each device of the shape, memoises it). Every field it reads is the
    shape's: its sizes and the dtype path's operand bytes."""
    n, k = st.n, st.k
    rows, active = st.rows, st.active

    # -- rows, experts and padding (per-expert counts vary: expected padded blocks per expert)
    if st.experts > 1:
        blocks_m = st.experts * expected_blocks(st.M, st.route_p, bm)
    else:
        blocks_m = float(-(-rows // bm))
    blocks_m = max(blocks_m, 1.0)
    m_blocks_per_expert = max(1.0, blocks_m / active)
    padding = rows / (blocks_m * bm)
    n_tiles = -(-n // bn)
    programs = max(1, int(math.ceil(blocks_m * n_tiles - 1e-9)))
    k_iters = max(1, -(-k // bk))
    real_rows = rows / blocks_m
    stage_bytes = real_rows * bk * st.a_b + bn * bk * st.b_b
    return blocks_m, m_blocks_per_expert, padding, n_tiles, programs, k_iters, real_rows, stage_bytes


def _block_terms(st: _Static, bm: int, bn: int, bk: int) -> tuple:
    """What a prediction takes from the block sizes, the shape and the device alone (the
    padding, the grid, the K loop, a stage's bytes and its L2 time): the same for every warp
    count, stage count and group size of a tile (``st.blocks`` memoises it)."""
    shared = st.shape_blocks.get((bm, bn, bk))
    if shared is None:
        shared = st.shape_blocks[(bm, bn, bk)] = _shape_block_terms(st, bm, bn, bk)
    blocks_m, m_blocks_per_expert, padding, n_tiles, programs, k_iters, real_rows, stage_bytes = shared
    per_sm = -(-programs // st.sms)
    t_l2 = stage_bytes / st.l2_rate
    # Throughput terms are work: the SM runs all its programs' iterations (a last, partial
    # round of programs is not a full one)
    store = real_rows * bn * st.c_b / st.l2_rate
    t_l2_share = per_sm * (k_iters * t_l2 + store)
    # K-contiguous rows of BK elements: segments shorter than c.dram_segment_bytes waste bursts
    seg_b = min(1.0, bk * st.b_b / st.segment)
    seg_a = min(1.0, bk * st.a_b / st.segment)
    return (blocks_m, m_blocks_per_expert, padding, n_tiles, programs, k_iters, per_sm, real_rows, stage_bytes, t_l2,
            t_l2_share, seg_b, seg_a)


def _predict(st: _Static, bm: int, bn: int, bk: int, group: int, warps: int, stages: int, smem_bytes,
             time_only: bool):
    """:func:`predict` once the config's values, the shape's and device's facts (``st``) and the
    shared memory are known. (It runs for every candidate of every fix search: ``min``/``max`` of
    two values are written out as the comparisons they make, same operands, same result.)"""
    blocks = st.blocks.get((bm, bn, bk))
    if blocks is None:
        blocks = st.blocks[(bm, bn, bk)] = _block_terms(st, bm, bn, bk)
    (blocks_m, m_blocks_per_expert, padding, n_tiles, programs, k_iters, per_sm, real_rows, stage_bytes, t_l2,
     t_l2_share, seg_b, seg_a) = blocks
    tile = st.tiles.get((bm, bn, bk, warps, smem_bytes))
    if tile is None:
        tile = _tile_terms(st, bm, bn, bk, warps, smem_bytes)
    swap, label, path_eff, flops_iter, smem_read, regs, spilled, spill_factor, occupancy, limit_name = tile
    resident = per_sm if per_sm < occupancy else occupancy  # min(occupancy, per_sm)
    if resident < occupancy:
        limit_name = "grid"
    rounds = -(-per_sm // resident)

    # -- per-iteration times on one SM
    util = resident * warps / st.subpartitions
    if not util < 1.0:  # min(1.0, util)
        util = 1.0
    t_mma = flops_iter / (st.peak_per_sm * path_eff * util)
    t_smem = smem_read / st.smem_rate
    if t_smem > t_mma:  # max(t_mma, t_smem)
        t_mma = t_smem
    if st.block_scales:
        t_mma += bm * bn * st.scale_cycles / st.clock
    latency = st.latency
    in_stages = stages - 1 if stages - 1 > 1 else 1  # max(stages - 1, 1): loads in flight
    # one stage's load completes after the latency plus its own transfer; S-1 are in flight
    if stages <= 1:
        t_lat = latency + t_l2 + t_mma + st.t_ovh
    else:
        t_lat = (latency + t_l2) / in_stages
    # Throughput terms are work: the SM runs all its programs' iterations (a last, partial
    # round of programs is not a full one). The latency bound is a chain: each wave of resident
    # programs waits for its own loads.
    t_compute = per_sm * k_iters * (t_mma + st.t_ovh)
    t_chain = rounds * k_iters * t_lat
    # a program fills its pipeline (one latency) and ends with its epilogue; co-resident programs
    # drift apart, so after the first round one's fill and epilogue run under the others' main
    # loops (a lone program per SM exposes them every round)
    fixed = st.fixed  # latency + epilogue
    # the launch's fill: the first wave's resident programs all issue their num_stages - 1
    # prologue stages (BK deep each) at once and share the SM's part of the DRAM bandwidth before
    # any MMA can start (c.pipeline_fill_share; later programs start under the running ones' loops).
    # Exposed once, so it matters where the SM runs one wave of short K loops (small M): what a
    # deeper BLOCK_SIZE_K costs there
    fill = resident * in_stages * stage_bytes * st.fill_share
    busiest = t_compute  # max(t_compute, t_l2_share, t_chain)
    if t_l2_share > busiest:
        busiest = t_l2_share
    if t_chain > busiest:
        busiest = t_chain
    t_sm = busiest * spill_factor + fixed * (1.0 + (rounds - 1) / resident) + fill

    # -- DRAM
    g = float(group)
    g_eff = m_blocks_per_expert if m_blocks_per_expert < g else g  # min(group, m_blocks_per_expert)
    # groups of G M blocks per expert: each group after the first re-reads the weights. The
    # expected count, not its ceiling: an expert gets a second M block only as often as its
    # rows overflow one (E[ceil(X / BM)] of a few rows is 1.00001, not 2)
    passes = m_blocks_per_expert / g_eff
    if not passes > 1.0:  # max(1.0, passes)
        passes = 1.0
    w_bytes = st.w_all * (1.0 + (passes - 1) * st.miss)
    # A re-reads: the programs in flight cover min(G, in flight) M blocks and the N tiles that
    # leave room for; a group's A rows are visited once per such sweep of its N tiles, and come
    # from DRAM again as far as the group's A rows do not stay in L2
    resident_all = st.sms * occupancy
    in_flight_programs = resident_all if resident_all < programs else programs  # min(programs, sms x occupancy)
    window = float(in_flight_programs)
    g_all = blocks_m if blocks_m < g else g  # min(group, blocks_m)
    per_group = window / (window if window < g_all else g_all)  # window / min(g_all, window)
    if not per_group > 1.0:  # max(1.0, per_group)
        per_group = 1.0
    n_window = float(n_tiles)
    if per_group < n_window:  # min(n_tiles, per_group)
        n_window = per_group
    sweeps = math.ceil(n_tiles / n_window - 1e-9)
    miss_a = g_all * bm * st.k * st.a_b / st.l2_reused
    if not miss_a < 1.0:  # min(1.0, miss_a)
        miss_a = 1.0
    a_bytes = st.a_all * (1.0 + (sweeps - 1) * miss_a)
    # K-contiguous rows of BK elements: segments shorter than c.dram_segment_bytes waste bursts
    # (seg_b, seg_a: _block_terms)
    dram_bytes = w_bytes / seg_b + a_bytes / seg_a + st.c_all
    # Little's law: the bandwidth reached is at most the bytes in flight over the latency. The
    # two limits meet softly (a 2-norm): near saturation requests queue and the loaded latency
    # grows, so a deeper pipeline still gains a few per cent where the hard minimum says the
    # bandwidth is already reached
    in_flight = in_flight_programs * in_stages * stage_bytes
    t_dram = dram_bytes * math.hypot(st.inv_bw, latency / (in_flight if in_flight > 1e-9 else 1e-9))

    p = st.overlap_p
    core = (t_sm ** p + t_dram ** p) ** (1.0 / p)
    launch = st.launch_us
    if time_only:
        return launch + core * 1e6
    terms = {"compute": t_compute * 1e6, "l2": t_l2_share * 1e6, "latency": t_chain * 1e6,
             "dram": t_dram * 1e6}
    return Prediction(
        time_us=launch + core * 1e6,
        sm_us=t_sm * 1e6,
        dram_us=t_dram * 1e6,
        compute_us=terms["compute"],
        l2_us=terms["l2"],
        latency_us=terms["latency"],
        launch_us=launch,
        programs=programs,
        programs_per_sm=per_sm,
        occupancy=occupancy,
        occupancy_limit=limit_name,
        rounds=rounds,
        padding=padding,
        regs_per_thread=regs,
        spilled_regs=spilled,
        smem_bytes=smem_bytes,
        mma=label,
        k_iterations=k_iters,
        bound=max(terms, key=terms.get),
    )


@dataclass(frozen=True)
class Ranked:
    config: Mapping
    score_us: float  # weighted geometric mean of the predicted times over the devices
    predictions: Mapping[str, Prediction] = field(default_factory=dict)  # device key -> prediction


def rank(candidates: Iterable[Mapping], shape: GemmShape, devices: Sequence, *,
         weights: Sequence[float] | None = None, coefficients: Mapping[str, Coefficients] | None = None,
         smem: Callable | None = None, top_k: int | float | None = None) -> list[Ranked]:
    """Candidates sorted by predicted time (fastest first).

    With several devices the score is the weighted geometric mean of the per-device times, so a
    config that is 10 % slower on one device and 10 % faster on another of equal weight ties.
    ``top_k``: keep that many (an int) or that fraction (a float <= 1), as Triton's autotuner.
    """
    devices = list(devices)
    if not devices:
        raise ValueError("rank needs at least one device")
    weights = list(weights) if weights is not None else [1.0] * len(devices)
    total = sum(weights)
    coeffs = {d.key: (coefficients or {}).get(d.key) or load_coefficients(d) for d in devices}
    out = []
    for cfg in candidates:
        preds = {}
        log_sum = 0.0
        for dev, w in zip(devices, weights):
            pred = predict(cfg, shape, dev, coeffs[dev.key], smem=smem)
            preds[dev.key] = pred
            log_sum += w * math.log(pred.time_us)
        out.append(Ranked(cfg, math.exp(log_sum / total), preds))
    out.sort(key=lambda r: r.score_us)
    if top_k is not None:
        keep = int(top_k) if isinstance(top_k, int) else max(1, int(math.ceil(top_k * len(out))))
        out = out[:keep]
    return out
