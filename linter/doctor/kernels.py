"""The Triton kernels a model launches, with the problem sizes each engine gives them.

For each engine and target the doctor judges:

* the fused-MoE gate/up GEMM (``w1``: N = 2 x intermediate per shard, K = hidden) and down GEMM
  (``w2``: N = hidden, K = intermediate per shard), both configured by the table named
  ``E=<local experts>,N=<intermediate per shard>,...``;
* for block-quantised fp8 checkpoints, the block-GEMM kernel of the dense projections
  (attention projections, dense MLP layers, unfused shared experts), one table per (N, K);
* for MLA models, the Triton grouped decode kernel (stage 1), whose launch parameters are
  fixed by the engine, with the KV-cache dtype.

Parallelism divides the sizes the way both engines do: the MoE tensor-parallel size is
``tp / ep``; E = experts / ep; N = intermediate / (tp / ep); attention heads and dense
intermediate sizes are divided by tp. SGLang fuses the shared expert into the routed experts
for some architectures (E + 1), per the profile's ``shared_expert_fusion`` rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilefit.serving.profiles import Profile

from .model import ModelShape


class ShapeError(ValueError):
    """The model's sizes do not divide by the requested parallelism (exit code 2)."""


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    ep: int = 1

    @property
    def moe_tp(self) -> int:
        if self.ep >= self.tp:
            return 1
        return self.tp // self.ep

    def check(self) -> None:
        if self.tp < 1 or self.ep < 1:
            raise ShapeError("--tp-size and --ep-size must be at least 1")
        if self.ep < self.tp and self.tp % self.ep:
            raise ShapeError(f"--ep-size {self.ep} does not divide --tp-size {self.tp}")
        if self.ep > self.tp and self.ep % self.tp:
            raise ShapeError(f"--ep-size {self.ep} is not a multiple of --tp-size {self.tp}")


def _div(value: int, by: int, what: str) -> int:
    if value % by:
        raise ShapeError(f"{what} {value} does not divide by {by}")
    return value // by


@dataclass(frozen=True)
class MoeShape:
    E: int  # local experts (the file name's E)
    N: int  # intermediate size per shard (the file name's N)
    K: int  # hidden size
    top_k: int
    fused_shared: int = 0  # shared experts SGLang fused into E
    fusion_note: str | None = None

    def describe(self) -> str:
        fused = f" incl. {self.fused_shared} fused shared expert" if self.fused_shared else ""
        return f"E={self.E}{fused}, N={self.N}, K={self.K}, top-{self.top_k}"


def shared_fusion(model: ModelShape, profile: Profile, device, parallel: Parallel, mode: str) -> tuple[int, str | None]:
    """How many shared experts SGLang fuses into the routed ones (0 or n_shared) and why."""
    rules = profile.moe.get("shared_expert_fusion")
    if not rules or not model.n_shared_experts:
        return 0, None
    if mode == "off":
        return 0, "shared-expert fusion off (--shared-expert-fusion off)"
    if mode == "on":
        return model.n_shared_experts, "shared expert fused into the MoE kernel (--shared-expert-fusion on)"
    matched = False
    for rule in rules.get("rules", []):
        if model.architecture not in rule.get("architectures", []):
            continue
        routed = rule.get("n_routed_experts")
        if routed is not None and model.num_experts not in routed:
            continue
        if rule.get("n_shared_experts") is not None and model.n_shared_experts != rule["n_shared_experts"]:
            continue
        matched = True
    if not matched:
        return 0, None
    if device.vendor == "NVIDIA":
        cc = device.compute_capability or (0, 0)
        if tuple(cc) < tuple(rules.get("min_cc", (8, 0))):
            return 0, f"{profile.label} turns shared-expert fusion off below sm_{''.join(map(str, rules.get('min_cc', (8, 0))))}"
        if parallel.ep > 1 and not rules.get("cuda_with_ep", False):
            return 0, f"{profile.label} turns shared-expert fusion off with expert parallelism on CUDA"
    elif device.vendor == "AMD":
        amd_min = rules.get("amd_min_arch", "gfx942")
        if device.arch < amd_min and len(device.arch) == len(amd_min):
            return 0, f"{profile.label} fuses shared experts only on {amd_min} and newer"
    else:
        return 0, None
    return model.n_shared_experts, (f"{profile.label} fuses the {model.n_shared_experts} shared expert into the "
                                    "routed experts for this architecture (E + 1; --shared-expert-fusion off to judge without)")


def moe_shape(model: ModelShape, profile: Profile, device, parallel: Parallel, fusion_mode: str = "auto") -> MoeShape | None:
    if not model.is_moe:
        return None
    if not model.top_k:
        raise ShapeError(f"{model.source}: MoE model without experts-per-token (num_experts_per_tok)")
    fused, note = shared_fusion(model, profile, device, parallel, fusion_mode)
    E = _div(model.num_experts, parallel.ep, "number of experts") if parallel.ep <= model.num_experts else 0
    if E == 0:
        raise ShapeError(f"--ep-size {parallel.ep} exceeds the {model.num_experts} experts")
    N = _div(model.moe_intermediate_size, parallel.moe_tp, "MoE intermediate size")
    return MoeShape(E=E + fused, N=N, K=model.hidden_size, top_k=model.top_k, fused_shared=fused, fusion_note=note)


@dataclass(frozen=True)
class Gemm:
    label: str
    N: int
    K: int


def dense_gemms(model: ModelShape, parallel: Parallel, fused_shared: int) -> list[Gemm]:
    """Dense projections (per tensor-parallel shard) that run the block-GEMM kernel."""
    tp = parallel.tp
    hidden = model.hidden_size
    out: list[Gemm] = []
    if not hidden:
        return out
    heads = model.num_attention_heads
    if model.is_mla and heads:
        h = max(heads // tp, 1)
        nope = model.qk_nope_head_dim or 0
        rope = model.qk_rope_head_dim or 0
        v = model.v_head_dim or nope
        if model.q_lora_rank:
            out.append(Gemm("fused_qkv_a_proj_with_mqa", model.q_lora_rank + model.kv_lora_rank + rope, hidden))
            out.append(Gemm("q_b_proj", h * (nope + rope), model.q_lora_rank))
        else:
            out.append(Gemm("q_proj", h * (nope + rope), hidden))
            out.append(Gemm("kv_a_proj_with_mqa", model.kv_lora_rank + rope, hidden))
        out.append(Gemm("kv_b_proj", h * (nope + v), model.kv_lora_rank))
        out.append(Gemm("o_proj", hidden, h * v))
    elif heads and model.head_dim:
        h = max(heads // tp, 1)
        kv = max((model.num_key_value_heads or heads) // tp, 1)
        out.append(Gemm("qkv_proj", (h + 2 * kv) * model.head_dim, hidden))
        out.append(Gemm("o_proj", hidden, h * model.head_dim))
    if model.has_dense_layers and model.intermediate_size:
        inter = model.intermediate_size // tp
        out.append(Gemm("dense mlp gate_up_proj", 2 * inter, hidden))
        out.append(Gemm("dense mlp down_proj", hidden, inter))
    shared_inter = None
    if model.shared_expert_intermediate_size:
        shared_inter = model.shared_expert_intermediate_size
    elif model.n_shared_experts and model.moe_intermediate_size and not fused_shared:
        shared_inter = model.n_shared_experts * model.moe_intermediate_size
    if shared_inter:
        inter = shared_inter // tp
        out.append(Gemm("shared_experts gate_up_proj", 2 * inter, hidden))
        out.append(Gemm("shared_experts down_proj", hidden, inter))
    seen: dict[tuple[int, int], Gemm] = {}
    for g in out:
        key = (g.N, g.K)
        if key in seen:
            seen[key] = Gemm(f"{seen[key].label}, {g.label}", g.N, g.K)
        else:
            seen[key] = g
    return [g for g in seen.values() if g.N > 0 and g.K > 0]
