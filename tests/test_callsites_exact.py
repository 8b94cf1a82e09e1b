"""Call sites compiled for real archs (ahead of time, no GPU): the MLA decode case of the crash
reports, an autotuned GEMM, a launch through a wrapper, module constants, ``# noqa``, fixes,
``--allow-import``.

About 25 compiles of ~0.5 s each, into a fresh cache folder for this module (its compile records
shared with the other modules that compile the fixture tree: conftest.py); skipped without
Triton. The numbers are Triton 3.9's; other releases are checked for the verdicts only.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from tilefit.api import CheckOptions, run_check  # noqa: E402
from tilefit.callsites.evaluate import CallsiteEvaluator, launch_cases  # noqa: E402
from tilefit.callsites.project import Project  # noqa: E402
from tilefit.callsites.sites import build_sites  # noqa: E402
from tilefit.config import Settings  # noqa: E402
from tilefit.device_db import load_database  # noqa: E402
from extras import torch_or_skip  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "callsites"
ENGINE = FIXTURES / "engine"
TRITON_39 = triton.__version__.startswith("3.9")

MLA_KEY = "engine.attention.mla_decode:_mla_grouped_stage1"
# the launch as the engine makes it for DeepSeek-V2-Lite (16 heads, one latent KV head)
MLA_TABLE = {MLA_KEY: {"kv_cache": ["bf16", "fp8e4nv"], "Att_Out": ["fp32"], "kv_group_num": [16],
                       "q_head_num": [16], "NUM_KV_SPLITS": [4]}}
BF16_ONLY = {"a_ptr,b_ptr": ["bf16"]}


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(cache_sharing_compiles):
    """A fresh cache; its compile records are shared with the other modules that compile the
    fixture tree (conftest.py)."""
    return cache_sharing_compiles


@pytest.fixture(scope="module")
def db():
    return load_database()


def _check(paths, targets, kernels=None, **opts):
    settings = Settings(kernels=kernels or {}, per_file_ignores=opts.pop("per_file_ignores", {}))
    return run_check([str(p) for p in paths], CheckOptions(targets=list(targets), **opts), settings)


# -- MLA decode (oor_cases.md section 6, cases 2 and 3) ----------------------------------------------

def test_mla_fixture_shared_memory_per_kv_dtype_and_num_stages(db):
    """Triton 3.9, sm_89 and sm_120: bf16 52224 / 89088, fp8 86016 / 120832 (num_stages 1 / 2).
    Reference on sm_121 with Triton 3.7 (vLLM PR#54013's engine kernel): bf16 59392 / 63488,
    fp8 83968 / 102400. Both: fp8 overflows 101376 only with num_stages=2, bf16 always fits."""
    project = Project.scan([str(p) for p in (ENGINE / "attention").glob("*.py")])
    (site,) = build_sites(project).launches
    (case,) = launch_cases(site)
    ev = CallsiteEvaluator(project, kernels=MLA_TABLE)
    variants = {v.label: v for v in ev.variants(site.kernel)}
    assert set(variants) == {"kv_cache=bf16", "kv_cache=fp8e4nv"}
    got = {}
    for key in ("sm_89", "sm_120"):
        dev = db.get(key)
        for label, variant in variants.items():
            for stages in (1, 2):
                out = ev.run(case.with_value("num_stages", stages), variant, dev)
                assert out.ok and out.estimator == "exact", out
                got[(key, label, stages)] = out.shared
    for key in ("sm_89", "sm_120"):
        limit = db.get(key).smem_per_block_optin
        assert limit == 101376
        assert got[(key, "kv_cache=bf16", 1)] < got[(key, "kv_cache=bf16", 2)] <= limit
        assert got[(key, "kv_cache=fp8e4nv", 1)] <= limit < got[(key, "kv_cache=fp8e4nv", 2)]
    if TRITON_39:
        assert {k: v for k, v in got.items() if k[0] == "sm_89"} == {
            ("sm_89", "kv_cache=bf16", 1): 52224, ("sm_89", "kv_cache=bf16", 2): 89088,
            ("sm_89", "kv_cache=fp8e4nv", 1): 86016, ("sm_89", "kv_cache=fp8e4nv", 2): 120832}
        assert all(got[("sm_120",) + k[1:]] == v for k, v in got.items() if k[0] == "sm_89")


def test_mla_launch_reports_the_fp8_variant_with_a_guard_not_an_edit():
    result = _check([ENGINE / "attention"], ["rtx4090", "sm_120"], MLA_TABLE)
    diags = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert len(diags) == 1, [d.message for d in result.diagnostics]
    (d,) = diags
    assert d.message.startswith("OutOfResources on rtx4090, sm_120 with kv_cache=fp8e4nv: shared memory, Required: ")
    assert "Hardware limit: 101376" in d.message and "num_stages=2" in d.message
    assert "use num_stages=1 when kv_cache=fp8e4nv (then " in d.message and " and the device has < " in d.message
    assert d.fix is None  # bf16 fits: a device-aware guard, not an edit
    assert d.pointer is None and d.data["variant"] == "kv_cache=fp8e4nv" and d.data["archs"] == ["sm_89", "sm_120"]
    assert d.path.endswith("attention/mla_decode.py") and d.span.start.line == 128  # the num_stages literal
    assert not [x for x in result.diagnostics if x.code == "EST002"]
    if TRITON_39:
        assert "Required: 120832" in d.message


def test_mla_without_table_says_which_constexprs_are_missing():
    result = _check([ENGINE / "attention"], ["rtx4090"])
    (d,) = result.diagnostics
    assert d.code == "EST002" and d.severity.value == "info"
    assert "kv_group_num, q_head_num (`q.shape` is computed at run time)" in d.message  # one reason, said once
    assert "NUM_KV_SPLITS (num_kv_splits is a parameter of decode_grouped_stage1() without a default)" in d.message
    assert f'[tool.tilefit.kernels."{MLA_KEY}"]' in d.message


def test_v100_mla_halves_block_n_because_stages_do_not_help(tmp_path):
    """1Cat-vLLM PR#211: 102400 bytes on sm_70 (limit 98304) whatever num_stages; BLOCK_N 32 -> 16."""
    result = _check([ENGINE / "attention"], ["v100-sxm2"], MLA_TABLE)
    (d,) = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert "with kv_cache=bf16" in d.message and "Hardware limit: 98304" in d.message
    if TRITON_39:
        assert "Required: 102400" in d.message
    assert d.fix is not None and d.fix.applicability.label == "unsafe"
    (edit,) = d.fix.edits
    source = (ENGINE / "attention" / "mla_decode.py").read_bytes()
    assert source[edit.start_offset:edit.end_offset] == b"32" and edit.content == "16"
    assert "BLOCK_N=16" in d.fix.title
    # applying the edit gives a launch that fits (the kernel is unchanged: a cache hit)
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy)
    fixed = copy / "attention" / "mla_decode.py"
    fixed.write_bytes(source[:edit.start_offset] + edit.content.encode() + source[edit.end_offset:])
    again = _check([copy / "attention"], ["v100-sxm2"], MLA_TABLE)
    assert not [x for x in again.diagnostics if x.code == "SMEM002"], [x.message for x in again.diagnostics]


# -- autotune lists ----------------------------------------------------------------------------------

def test_autotuned_gemm_one_config_overflows_and_every_config_of_another():
    kernels = {"engine.ops.gemm:matmul_kernel": BF16_ONLY, "engine.ops.gemm:matmul_wide_kernel": BF16_ONLY}
    result = _check([ENGINE / "ops" / "gemm.py"], ["rtx4090"], kernels)
    smem3 = [d for d in result.diagnostics if d.code == "SMEM003"]
    assert len(smem3) == 2, [d.message for d in result.diagnostics]
    warn = next(d for d in smem3 if d.severity.value == "warning")
    assert "autotune config #1 of matmul_kernel (BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)" \
        in warn.message and "overflows rtx4090" in warn.message
    assert warn.span.start.line == 21
    assert warn.fix is not None
    (edit,) = warn.fix.edits
    source = (ENGINE / "ops" / "gemm.py").read_bytes()
    assert source[edit.start_offset:edit.end_offset] == b"4" and edit.content == "3"
    err = next(d for d in smem3 if d.severity.value == "error")
    assert err.message.startswith("every autotune config of matmul_wide_kernel overflows rtx4090")
    assert "the autotuner has nothing to run there" in err.message and err.fix is None
    if TRITON_39:
        assert "Required: 147456, Hardware limit: 101376" in warn.message
    # configs of the other kernel that fit, and the launch of the autotuned kernel, give nothing else
    assert all(d.code == "SMEM003" for d in result.diagnostics)


def test_autotune_configs_run_triton_configs_default_stages_on_rocm(tmp_path):
    """A ``triton.Config`` without num_stages runs 3 stages on every backend (the autotuner passes
    Config's own default), while a plain HIP launch without num_stages runs 2. The 128x128x128
    fp16 tile needs 131072 B at 3 stages on gfx942 (LDS 65536) and fits at 2."""
    body = """(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))
"""
    kernel = f"""import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({{"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128}}, num_warps=8)], key=["M"])
@triton.jit
def mm_tuned{body}

@triton.jit
def mm_plain{body}

def tuned(a, b, c, M, N, K):
    mm_tuned[(1, 1)](a, b, c, M, N, K)


def plain(a, b, c, M, N, K):
    mm_plain[(1, 1)](a, b, c, M, N, K, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=8)
"""
    (tmp_path / "gemm.py").write_text(kernel)
    fp16 = {"a_ptr,b_ptr": ["fp16"]}
    result = _check([tmp_path], ["mi300x"], kernels={"gemm:mm_tuned": fp16, "gemm:mm_plain": fp16})
    # the plain launch is evaluated (no EST002) and fits at HIP's 2 stages
    smem = result.diagnostics
    assert [d.code for d in smem] == ["SMEM003"], [d.message for d in result.diagnostics]
    assert smem[0].message.startswith("every autotune config of mm_tuned overflows mi300x")
    assert "Hardware limit: 65536" in smem[0].message
    if TRITON_39:
        assert "Required: 131072," in smem[0].message


# -- wrappers, module constants, noqa ---------------------------------------------------------------

def test_wrapper_call_sites_module_constants_and_noqa():
    kernels = {"engine.ops.gemm_plain:matmul_plain_kernel": BF16_ONLY}
    files = [ENGINE / "ops" / n for n in ("launcher.py", "noqa_cases.py", "gemm_plain.py", "tiles.py")]
    result = _check(files, ["rtx4090"], kernels)
    smem2 = [d for d in result.diagnostics if d.code == "SMEM002"]
    where = sorted((Path(d.path).name, d.span.start.line) for d in smem2)
    # gemm_wide's call of the wrapper (default num_stages=4), and the launch whose noqa names
    # another code; not gemm_narrow (num_stages=3, 64-wide tiles), not gemm_from_module (its
    # default num_stages=2), not the two launches silenced by # noqa
    assert where == [("launcher.py", 25), ("noqa_cases.py", 19)], [d.message for d in smem2]
    wide = next(d for d in smem2 if d.path.endswith("launcher.py"))
    assert "called here" in wide.message and "num_warps=8" in wide.message
    assert "default of num_stages in _launch()" in wide.message
    (edit,) = wide.fix.edits  # the wrapper's default, in the same file
    text = (ENGINE / "ops" / "launcher.py").read_bytes()
    assert text[edit.start_offset:edit.end_offset] == b"4" and edit.content == "3" and edit.start.line == 13
    silenced = _check(files, ["rtx4090"], kernels, per_file_ignores={"**/noqa_cases.py": ["SMEM002"]})
    assert sorted(Path(d.path).name for d in silenced.diagnostics if d.code == "SMEM002") == ["launcher.py"]


def test_fingerprints_ignore_line_moves(tmp_path):
    kernels = {"engine.ops.gemm_plain:matmul_plain_kernel": BF16_ONLY}
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy)
    before = _check([copy / "ops" / "launcher.py"], ["rtx4090"], kernels)
    path = copy / "ops" / "launcher.py"
    path.write_text("# a new first line\n\n" + path.read_text())
    after = _check([copy / "ops" / "launcher.py"], ["rtx4090"], kernels)
    assert [d.fingerprint for d in before.diagnostics] == [d.fingerprint for d in after.diagnostics]
    assert [d.span.start.line + 2 for d in before.diagnostics] == [d.span.start.line for d in after.diagnostics]


# -- no import, and --allow-import -------------------------------------------------------------------

def test_scanned_modules_are_never_imported():
    kernels = {"engine.ops.explosive:scale_kernel": {"x_ptr,y_ptr": ["fp16"]}}
    result = _check([ENGINE / "ops" / "explosive.py"], ["rtx4090"], kernels, extend_select=["EST002"])
    assert result.diagnostics == [] and result.errors == []
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules)


def test_allow_import_is_the_fallback_for_kernels_that_cannot_be_extracted():
    torch_or_skip()
    kernels = {"engine.ops.dynamic:quant_kernel": {"x_ptr": ["bf16"], "y_ptr": ["fp8e4nv"]}}
    plain = _check([ENGINE / "ops" / "dynamic.py"], ["rtx4090"], kernels)
    (d,) = plain.diagnostics
    assert d.code == "EST002" and "FP8_MAX" in d.message and "computed by Python code" in d.message
    assert "--allow-import" in d.message
    saved = list(sys.path)
    try:
        imported = _check([ENGINE / "ops" / "dynamic.py"], ["rtx4090"], kernels, allow_import=True)
        assert imported.diagnostics == [] and imported.errors == []
        ev_mods = [m for m in sys.modules if m == "engine.ops.dynamic"]
        assert ev_mods  # it was imported this time
    finally:
        sys.path[:] = saved
        for name in [m for m in sys.modules if m == "engine" or m.startswith("engine.")]:
            del sys.modules[name]


def test_cli_reports_the_mla_case(cli, tmp_path):
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(
        '[tool.tilefit]\ntargets = ["rtx4090", "sm_120"]\n\n'
        f'[tool.tilefit.kernels."{MLA_KEY}"]\n'
        'kv_cache = ["bf16", "fp8e4nv"]\nAtt_Out = "fp32"\nkv_group_num = 16\nq_head_num = 16\nNUM_KV_SPLITS = 4\n')
    result = cli("check", "--config", cfg, ENGINE / "attention")
    assert result.exit_code == 1, result.output
    assert "SMEM002 OutOfResources on rtx4090, sm_120 with kv_cache=fp8e4nv: shared memory, Required: " \
        in result.output
    ok = cli("check", "--config", cfg, "--ignore", "SMEM002", ENGINE / "attention")
    assert ok.exit_code == 0, ok.output


def test_default_config_branches_are_reported_per_branch():
    kernels = {"engine.ops.gemm_plain:matmul_plain_kernel": BF16_ONLY}
    result = _check([ENGINE / "ops" / "default_config.py"], ["rtx4090"], kernels)
    (d,) = [d for d in result.diagnostics if d.code == "SMEM002"]
    assert d.message.endswith("[config of line 9]") or "[config of line 9]" in d.message
    assert d.data["branch"] == "config of line 9" and d.fix is not None  # num_stages literal in the dict
    (edit,) = d.fix.edits
    assert edit.start.line == 9


def test_fix_python_applies_literal_edits(tmp_path):
    from tilefit.fix.python import fix_python

    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy)
    kernels = {"engine.ops.gemm_plain:matmul_plain_kernel": BF16_ONLY}
    result = _check([copy / "ops" / "launcher.py"], ["rtx4090"], kernels)
    fixed = fix_python(result.diagnostics)
    (only,) = fixed.values()
    assert only.error is None and len(only.applied) == 1
    assert b"def _launch(kernel, a, b, c, block_n, num_stages=3):" in only.fixed
    (copy / "ops" / "launcher.py").write_bytes(only.fixed)
    again = _check([copy / "ops" / "launcher.py"], ["rtx4090"], kernels)
    assert not [d for d in again.diagnostics if d.code == "SMEM002"]


def test_check_fix_writes_call_site_fixes_and_they_hold(cli, tmp_path):
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy)
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.tilefit]\ntargets = ["rtx4090"]\n\n'
                   '[tool.tilefit.kernels."engine.ops.gemm_plain:matmul_plain_kernel"]\n'
                   '"a_ptr,b_ptr" = ["bf16"]\n')
    launcher = copy / "ops" / "launcher.py"
    before = launcher.read_bytes()
    safe = cli("check", "--config", cfg, "--fix", launcher)  # call-site fixes are unsafe: nothing written
    assert safe.exit_code == 1 and launcher.read_bytes() == before
    res = cli("check", "--config", cfg, "--fix", "--unsafe-fixes", launcher)
    assert res.exit_code == 0, res.output
    after = launcher.read_bytes()
    assert b"num_stages=3):" in after and after != before
    assert len(after) == len(before)  # one literal replaced, nothing else touched
    again = cli("check", "--config", cfg, "--fix", "--unsafe-fixes", launcher)
    assert again.exit_code == 0 and launcher.read_bytes() == after
