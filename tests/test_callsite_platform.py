"""Branches resolved per target (issue 18): with targets of one backend, platform tests
(``current_platform.is_rocm()``, ``is_hip()``, ``torch.version.hip``) fold, locals follow only the
assignments that reach the launch, and a launch under ``if is_hip_:`` is no NVIDIA launch. With
targets of both backends, both arms stay."""

from __future__ import annotations

from pathlib import Path

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_sites
from tilefit.callsites.values import Lit
from tilefit.config import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "platform" / "decode.py"


def _values(backend):
    project = Project.scan([str(FIXTURE)])
    project.evaluator.backend = backend
    sites = build_sites(project)
    out = {}
    for s in sites.launches:
        vals = set()
        for inst in s.instances:
            b, w, st = inst.args["BLOCK"], inst.options["num_warps"], inst.options["num_stages"]
            vals.add(tuple(v.value if isinstance(v, Lit) else None for v in (b, w, st)))
        out.setdefault(s.launch.scope_name, set()).update(vals)
    return out, sites


def test_nvidia_targets_fold_the_platform_and_drop_the_rocm_only_launch():
    values, sites = _values("cuda")
    assert values == {"decode": {(64, 2, 2)}}  # head_dim=512 default: `elif head_dim >= 1024` folds too
    assert sites.off_platform == 1


def test_amd_targets_take_the_other_branch():
    values, sites = _values("hip")
    assert values["decode"] == {(8, 1, 1)} and values["decode_rocm_only"] == {(16, 4, 1)}
    assert sites.off_platform == 0


def test_mixed_targets_keep_both_arms():
    values, sites = _values(None)
    assert (64, 2, 2) in values["decode"] and (8, 1, 1) in values["decode"] and "decode_rocm_only" in values


def test_check_on_an_nvidia_target_reports_each_launch_once():
    result = run_check([str(FIXTURE)], CheckOptions(targets=["rtx4090"], estimator="analytic", coverage=True,
                                                    extend_select=["EST002"]), Settings())
    assert result.coverage.off_platform == 1
    assert result.coverage.launches == 1
    assert not any("is_hip_" in d.message for d in result.diagnostics), [d.message for d in result.diagnostics]


_PLAIN_LAUNCH = '''import triton
import triton.language as tl


@triton.jit
def gather_kernel(x_ptr, HEAD_DIM: tl.constexpr):
    offs = tl.arange(0, HEAD_DIM)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def gather(x):
    gather_kernel[(1,)](x, HEAD_DIM=576)
'''


def _module_sites(tmp_path, rel, backend):
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(_PLAIN_LAUNCH, encoding="utf-8")
    project = Project.scan([str(path)])
    project.evaluator.backend = backend
    return build_sites(project)


def test_a_module_only_rocm_code_imports_is_no_nvidia_launch(tmp_path):
    # vLLM 0.33.0's rocm_aiter_mla_sparse.py has no platform test of its own: its importers are the
    # ROCm backends (platform_modules.json), so on NVIDIA targets its launches are off-platform
    rel = "vllm/v1/attention/ops/rocm_aiter_mla_sparse.py"
    cuda = _module_sites(tmp_path / "a", rel, "cuda")
    assert cuda.launches == [] and cuda.off_platform == 1
    hip = _module_sites(tmp_path / "b", rel, "hip")
    assert [s.kernel.name for s in hip.launches] == ["gather_kernel"] and hip.off_platform == 0
    # the same code in a module any backend imports is judged on NVIDIA targets
    plain = _module_sites(tmp_path / "c", "vllm/v1/attention/ops/triton_gather.py", "cuda")
    assert [s.kernel.name for s in plain.launches] == ["gather_kernel"]


def test_the_platform_modules_table_is_validated_data():
    from tilefit.callsites.platforms import backend_of, table

    assert table() and all(backend in ("cuda", "hip", "xpu") for _, backend in table())
    assert backend_of("/x/vllm/v1/attention/ops/xpu_mla_sparse.py") == "xpu"
    assert backend_of("/x/vllm/v1/attention/ops/triton_decode_attention.py") is None
    # SGLang's aiter attention backend runs AMD's aiter library: ROCm only; its Triton backend is not
    assert backend_of("/x/sglang/srt/layers/attention/aiter_backend.py") == "hip"
    assert backend_of("/x/sglang/srt/layers/attention/triton_backend.py") is None
    assert backend_of("/x/vllm/v1/attention/ops/segmented_attention.py") == "hip"  # ROCM_SEGMENTED_ATTN only
    assert backend_of("/x/vllm/v1/attention/ops/chunked_prefill_paged_decode.py") == "hip"  # ROCM_ATTN only
    assert backend_of("/x/vllm/v1/attention/ops/triton_prefill_attention.py") is None  # TRITON_ATTN's prefill
    assert backend_of("/x/vllm/model_executor/layers/fused_moe/router/bf16x3_router_gemm_rocm.py") == "hip"
    # its CuTe DSL twin runs on CUDA, on the SM100 family only (capability_majors)
    assert backend_of("/x/vllm/model_executor/layers/fused_moe/router/bf16x3_router_gemm_cutedsl.py") == "cuda"


def test_a_module_only_sm100_gpus_run_is_no_launch_on_consumer_targets(tmp_path):
    # vLLM 0.33.0's DeepGEMM MegaMoE staging (prepare_megamoe.py) has no capability test of its
    # own: both its importers raise unless the GPU is of the SM100 family (platform_modules.json
    # capability_majors [10]); on sm_86/89/120 targets its launches are off-platform
    from tilefit.callsites.platforms import runs_on_none_of

    rel = "vllm/model_executor/layers/fused_moe/prepare_megamoe.py"

    def sites(where, capabilities):
        path = tmp_path / where / rel
        path.parent.mkdir(parents=True)
        path.write_text(_PLAIN_LAUNCH, encoding="utf-8")
        project = Project.scan([str(path)])
        project.evaluator.backend = "cuda"
        project.evaluator.capabilities = frozenset(capabilities)
        return build_sites(project)

    consumer = sites("a", {86, 89, 120})
    assert consumer.launches == [] and consumer.off_platform == 1
    blackwell = sites("b", {89, 100})  # one target of the family: judged there only
    assert [s.kernel.name for s in blackwell.launches] == ["gather_kernel"] and blackwell.off_platform == 0
    assert all("compute capability 100 (the launch runs there only)" in i.label
               for s in blackwell.launches for i in s.instances)
    untargeted = sites("c", set())  # no capabilities known: nothing to fold
    assert [s.kernel.name for s in untargeted.launches] == ["gather_kernel"]
    assert runs_on_none_of("/x/" + rel, {120}) and not runs_on_none_of("/x/" + rel, {103})
    assert not runs_on_none_of("/x/vllm/v1/attention/ops/triton_decode_attention.py", {86})
