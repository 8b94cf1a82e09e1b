"""Call sites in Python sources, statically: scan, names across modules, values, positions,
``# noqa``, the kernels table, parameter roles and the scratch-module extraction.

Nothing here compiles (see ``test_callsites_exact.py``) and nothing imports the fixtures.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tilefit.callsites.kernelinfo import analyze
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_sites
from tilefit.pysource.source import SourceFile
from tilefit.callsites.values import Arms, Lit, Unknown
from tilefit.config import ConfigError, settings_from_table
from tilefit.pysource.extract import ExtractError, extract_kernel

FIXTURES = Path(__file__).parent / "fixtures" / "callsites"
ENGINE = FIXTURES / "engine"


@pytest.fixture(scope="module")
def project():
    return Project.scan(sorted(str(p) for p in ENGINE.rglob("*.py")))


@pytest.fixture(scope="module")
def sites(project):
    return build_sites(project)


def _site(sites, kernel, scope=None, caller=None):
    found = [s for s in sites.launches if s.kernel.name == kernel and (scope is None or s.launch.scope_name == scope)
             and (caller is None or (s.caller is not None and s.caller.scope.name == caller))]
    assert found, [(s.kernel.name, s.launch.scope_name) for s in sites.launches]
    return found


def _lit(v):
    assert isinstance(v, Lit), v
    return v.value


# -- the scan ------------------------------------------------------------------------------------

def test_scan_finds_kernels_launches_and_autotune_lists(project):
    assert "engine" not in sys.modules
    mods = {m.name: m for m in project.all_modules()}
    assert {"engine.attention.mla_decode", "engine.attention.quant", "engine.ops.gemm", "engine.ops.gemm_plain",
            "engine.ops.launcher"} <= set(mods)
    mla = mods["engine.attention.mla_decode"].kernels["_mla_grouped_stage1"]
    assert mla.autotune is None
    constexprs = [p.name for p in mla.params if p.constexpr]
    assert constexprs[:3] == ["kv_group_num", "q_head_num", "BLOCK_DMODEL"] and "Lv" in constexprs
    gemm = mods["engine.ops.gemm"]
    assert gemm.kernels["matmul_kernel"].autotune is not None
    assert gemm.kernels["_epilogue"].autotune is None  # a jit helper is a kernel definition too
    assert project.stats.launches >= 8


def test_jit_aliases_and_reexported_triton(tmp_path):
    (tmp_path / "utils.py").write_text("import triton\nimport triton.language as tl\n")
    (tmp_path / "k.py").write_text(
        "from utils import triton, tl\nfrom triton import jit\n"
        "@jit\ndef a(x, N: tl.constexpr):\n    pass\n"
        "@triton.jit(do_not_specialize=['n'])\ndef b(x, n, M: 'tl.constexpr'):\n    pass\n"
        "@triton.heuristics({'EVEN': lambda args: args['n'] % 16 == 0})\n@triton.jit\ndef c(x, n, EVEN: tl.constexpr):\n"
        "    pass\n"
        "def not_a_kernel(triton):\n    pass\n")
    p = Project.scan([str(tmp_path / "k.py"), str(tmp_path / "utils.py")])
    m = next(m for m in p.all_modules() if m.name == "k")
    assert set(m.kernels) == {"a", "b", "c"}
    assert [p.constexpr for p in m.kernels["b"].params] == [False, False, True]
    assert len(m.kernels["c"].heuristics) == 1


def test_launch_resolution_same_module_import_and_module_alias(sites):
    # same module
    (mla,) = _site(sites, "_mla_grouped_stage1")
    assert mla.launch.module.name == "engine.attention.mla_decode"
    # `import engine.ops.gemm_plain as plain; plain.matmul_plain_kernel[grid]`
    (via_alias,) = _site(sites, "matmul_plain_kernel", scope="gemm_from_module")
    assert via_alias.kernel.module.name == "engine.ops.gemm_plain"
    # `from .gemm_plain import matmul_plain_kernel` in another module
    assert _site(sites, "matmul_plain_kernel", scope="other_code_does_not_silence")


def test_constants_from_module_names_default_args_and_other_modules(sites):
    (site,) = _site(sites, "matmul_plain_kernel", scope="gemm_from_module")
    (inst,) = site.instances
    assert _lit(inst.args["BLOCK_M"]) == 128 and "module constant BLOCK_M" in inst.args["BLOCK_M"].via
    assert _lit(inst.args["BLOCK_N"]) == 256  # tiles.BLOCK_N_WIDE through `from . import tiles`
    assert _lit(inst.args["BLOCK_K"]) == 64  # `from .tiles import BLOCK_K`
    assert inst.args["BLOCK_K"].loc.path.endswith("tiles.py")
    stages = inst.options["num_stages"]
    assert _lit(stages) == 2 and stages.via == "default of num_stages in gemm_from_module()"
    assert isinstance(inst.args["M"], Unknown) and "unpacked from `a.shape`" in inst.args["M"].reason


def test_launch_through_wrapper_is_evaluated_at_each_call_site(sites):
    found = _site(sites, "matmul_plain_kernel", scope="_launch")
    by_caller = {s.caller.scope.name: s for s in found}
    assert set(by_caller) == {"gemm_wide", "gemm_narrow"}  # the kernel is a parameter: no default site
    wide = by_caller["gemm_wide"].instances[0]
    assert _lit(wide.args["BLOCK_N"]) == 256
    assert _lit(wide.options["num_stages"]) == 4  # the wrapper's default
    assert _lit(wide.options["num_warps"]) == 8  # `8 if block_n >= 256 else 4` folds at this call site
    narrow = by_caller["gemm_narrow"].instances[0]
    assert _lit(narrow.args["BLOCK_N"]) == 64 and _lit(narrow.options["num_stages"]) == 3
    assert _lit(narrow.options["num_warps"]) == 4
    # diagnostics of a call site point at the call, in the caller's file
    assert by_caller["gemm_wide"].path.endswith("launcher.py")
    assert by_caller["gemm_wide"].anchor.start.line == 25


def test_if_expression_arms_are_reported_per_arm(tmp_path):
    (tmp_path / "m.py").write_text(
        "import triton\nimport triton.language as tl\nIS_HIP = False\n"
        "@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n"
        "def run(x, big):\n"
        "    stages = 1 if big else 2\n"
        "    BLOCK = 32\n"
        "    if IS_HIP:\n"
        "        BLOCK = 16\n"
        "    k[(1,)](x, B=BLOCK, num_warps=8 if big else 4, num_stages=stages)\n")
    p = Project.scan([str(tmp_path / "m.py")])
    (site,) = build_sites(p).launches
    labels = sorted(i.label for i in site.instances)
    # stages and num_warps follow the same test `big`: 2 runs, not 2 x 2 (no run has `big` and
    # `not big`); `if IS_HIP:` folds (a literal False), so only BLOCK = 32 reaches
    assert len(site.instances) == 2
    assert not any("if big" in lab.replace("if not big", "") and "if not big" in lab for lab in labels)
    values = {(_lit(i.options["num_stages"]), _lit(i.options["num_warps"]), _lit(i.args["B"])) for i in site.instances}
    assert values == {(1, 8, 32), (2, 4, 32)}
    # a test that does not fold keeps both assignments: 2 x 2
    (tmp_path / "m.py").write_text((tmp_path / "m.py").read_text().replace("if IS_HIP:", "if x.is_hip:"))
    (site,) = build_sites(Project.scan([str(tmp_path / "m.py")])).launches
    assert len(site.instances) == 4
    values = {(_lit(i.options["num_stages"]), _lit(i.options["num_warps"]), _lit(i.args["B"])) for i in site.instances}
    assert values == {(1, 8, 32), (2, 4, 32), (1, 8, 16), (2, 4, 16)}


def test_autotune_lists_inline_and_from_a_helper_function(sites):
    by_kernel = {s.kernel.name: s for s in sites.autotunes}
    inline = by_kernel["matmul_kernel"]
    assert inline.problem is None and len(inline.configs) == 3
    first = inline.configs[0]
    assert {k: _lit(v) for k, v in first.kwargs.items()} == {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}
    assert _lit(first.options["num_stages"]) == 4 and not first.generated
    assert first.anchor.start.line == 21  # the triton.Config( call
    assert [s.launch.scope_name for s in inline.launches] == ["matmul"]
    helper = by_kernel["matmul_wide_kernel"]
    assert len(helper.configs) == 2 and all(c.generated for c in helper.configs)
    assert {_lit(c.kwargs["BLOCK_M"]) for c in helper.configs} == {128, 256}


def test_unresolved_subscript_calls_are_not_sites(tmp_path):
    (tmp_path / "m.py").write_text("handlers = {}\ndef f(k, x):\n    handlers[k](x)\n    ext.kernel[(1,)](x)\n")
    p = Project.scan([str(tmp_path / "m.py")])
    s = build_sites(p)
    assert s.launches == [] and len(s.unresolved) == 2


# -- positions and noqa ----------------------------------------------------------------------------

def test_spans_are_character_columns_and_byte_offsets():
    text = 'x = "é日本"; k[g](a, num_stages=2)\n'
    src = SourceFile.from_bytes("m.py", text.encode())
    node = next(n for n in ast.walk(src.tree) if isinstance(n, ast.Constant) and n.value == 2)
    span = src.span(node)
    assert text[span.start.column - 1] == "2"  # 1-based character column
    assert src.data[span.start_offset:span.end_offset] == b"2"  # byte offsets
    assert span.start_offset == len(text[: span.start.column - 1].encode())


def test_spans_with_bom_and_crlf():
    data = b"\xef\xbb\xbfa = 1\r\nb = 22\r\n"
    src = SourceFile.from_bytes("m.py", data)
    node = next(n for n in ast.walk(src.tree) if isinstance(n, ast.Constant) and n.value == 22)
    span = src.span(node)
    assert data[span.start_offset:span.end_offset] == b"22" and span.start.line == 2 and span.start.column == 5


def test_noqa_grammar():
    src = SourceFile.from_bytes("m.py", (
        "a = 1  # noqa\n"
        "b = 2  # noqa: SMEM002\n"
        "c = 3  # NOQA:SMEM002,EST002\n"
        "d = 4  # noqa: SMEM002 EST002 trailing words\n"
        "e = '# noqa'\n"
        "f = 5  # a comment # noqa: SMEM003\n").encode())
    assert src.noqa(1).suppresses("SMEM002") and src.noqa(1).codes is None
    assert src.noqa(2).suppresses("SMEM002") and not src.noqa(2).suppresses("EST002")
    assert src.noqa(3).codes == {"SMEM002", "EST002"}
    assert src.noqa(4).codes == {"SMEM002", "EST002"}
    assert src.noqa(5) is None  # inside a string
    assert src.noqa(6).codes == {"SMEM003"}


# -- the kernels table -------------------------------------------------------------------------------

def test_kernels_table_validation():
    s = settings_from_table({"kernels": {"pkg.mod:k": {"kv_cache": ["bf16", "fp8e4nv"], "N": 16,
                                                       "K_Buffer, V_Buffer": "bf16"}}}, "pyproject.toml")
    assert s.kernels == {"pkg.mod:k": {"kv_cache": ["bf16", "fp8e4nv"], "N": [16], "K_Buffer,V_Buffer": ["bf16"]}}
    for bad, words in [({"k": {}}, "module:function"), ({"m:k": []}, "table"), ({"m:k": {"a b": 1}}, "parameter"),
                       ({"m:k": {"a": []}}, "empty"), ({"m:k": {"a": [1, "x"]}}, "one type"),
                       ({"m:k": {"a": [True, 2]}}, "one type"), ({"m:k": {"a": [{"x": 1}]}}, "one type")]:
        with pytest.raises(ConfigError, match=words):
            settings_from_table({"kernels": bad}, "pyproject.toml")


def test_kernels_table_matches_modules_by_trailing_name(project):
    from tilefit.callsites.evaluate import kernel_variants, table_for

    kernel = project.kernel_by_key("engine.attention.mla_decode:_mla_grouped_stage1")
    for key in ("engine.attention.mla_decode:_mla_grouped_stage1", "mla_decode:_mla_grouped_stage1",
                "attention/mla_decode.py:_mla_grouped_stage1"):
        assert table_for({key: {"kv_cache": ["bf16"]}}, kernel) == {"kv_cache": ["bf16"]}, key
    assert table_for({"other:_mla_grouped_stage1": {}}, kernel) is None
    info = analyze(kernel)
    variants = kernel_variants(kernel, info, {"kv_cache": ["bf16", "fp8"], "kv_group_num": 16, "nope": 1})
    assert [v.label for v in variants] == ["kv_cache=bf16", "kv_cache=fp8"]
    assert variants[1].dtype_of("kv_cache") == "fp8e4nv" and dict(variants[1].values) == {"kv_group_num": 16}
    assert "no parameter 'nope'" in variants[0].error
    bad = kernel_variants(kernel, info, {"kv_cache": ["bf61"]})
    assert "not a dtype" in bad[0].error


# -- parameter roles -----------------------------------------------------------------------------------

def test_parameter_roles_of_the_mla_kernel(project):
    info = analyze(project.kernel_by_key("engine.attention.mla_decode:_mla_grouped_stage1"))
    assert info.pointers == {"Q": "data", "kv_cache": "data", "kv_scale": "scale", "Req_to_tokens": "index",
                             "B_Seqlen": "index", "Att_Out": "output"}
    assert info.floats == {"sm_scale"}
    assert info.unit_strides == set()  # every address has an implicitly contiguous term


def test_parameter_roles_of_a_gemm(project):
    info = analyze(project.kernel_by_key("engine.ops.gemm_plain:matmul_plain_kernel"))
    assert info.pointers == {"a_ptr": "data", "b_ptr": "data", "c_ptr": "output"}
    assert info.unit_strides == {"stride_ak", "stride_bn", "stride_cn"}


def test_default_sweep_variants(project):
    from tilefit.callsites.evaluate import kernel_variants

    kernel = project.kernel_by_key("engine.ops.gemm_plain:matmul_plain_kernel")
    variants = kernel_variants(kernel, analyze(kernel), None)
    assert [v.label for v in variants] == ["a_ptr,b_ptr=bf16", "a_ptr,b_ptr=fp16", "a_ptr,b_ptr=fp8e4nv"]


# -- extraction ------------------------------------------------------------------------------------------

def test_extract_mla_kernel_with_helper_from_another_module_and_constexpr_global():
    before = set(sys.modules)
    s = extract_kernel(ENGINE / "attention" / "mla_decode.py", "_mla_grouped_stage1")
    assert s.functions == ("_mla_grouped_stage1", "dequant_to")  # helper from .quant
    assert s.constants == ("LOG2E",)
    assert "LOG2E = tl.constexpr(1.4426950408889634)" in s.source
    assert "import torch" not in s.source and "decode_grouped_stage1" not in s.source  # launcher left out
    assert s.name == "_tilefit_scratch_" + s.hash[:20]
    assert len(s.files) == 2
    assert set(sys.modules) - before == set()  # nothing imported
    ast.parse(s.source)
    again = extract_kernel(ENGINE / "attention" / "mla_decode.py", "_mla_grouped_stage1")
    assert again.hash == s.hash  # content-addressed


def test_extract_never_imports_the_file():
    s = extract_kernel(ENGINE / "ops" / "explosive.py", "scale_kernel")
    assert "RuntimeError" not in s.source and "scale_kernel" in s.source


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_extract_constexpr_globals_libdevice_variants_and_aliases(tmp_path):
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/helpers.py",
           "import triton\nimport triton.language as tl\nSCALE: tl.constexpr = 2\n"
           "@triton.jit\ndef twice(x):\n    return x * SCALE\n")
    path = _write(tmp_path, "pkg/k.py",
                  "import torch\nimport triton\nimport triton.language as tl\n"
                  "try:\n    from triton.language.extra.cuda import libdevice\n"
                  "except ImportError:\n    from triton.language.math import libdevice\n"
                  "from .helpers import twice as double\n"
                  "BLOCK: tl.constexpr = 64\nHALF = tl.constexpr(BLOCK // 2)\nUNUSED = torch.zeros(1)\n"
                  "@triton.jit\ndef k(x_ptr, n, B: tl.constexpr = BLOCK):\n"
                  "    offs = tl.arange(0, HALF)\n"
                  "    x = tl.load(x_ptr + offs)\n"
                  "    tl.store(x_ptr + offs, double(libdevice.exp(x)))\n")
    s = extract_kernel(path, "k")
    assert s.functions == ("k", "twice")
    assert set(s.constants) == {"BLOCK", "HALF", "SCALE"}
    assert s.source.index("BLOCK: tl.constexpr = 64") < s.source.index("HALF = tl.constexpr(BLOCK // 2)")
    assert "double = twice" in s.source
    assert "try:\n    from triton.language.extra.cuda import libdevice\nexcept ImportError:" in s.source
    assert "torch" not in s.source


@pytest.mark.parametrize("body,words", [
    ("import torch\nLIM = torch.finfo(torch.float16).max\n@triton.jit\ndef k(x):\n    y = LIM\n",
     "computed by Python code"),
    ("def helper(n):\n    return n * 2\n@triton.jit\ndef k(x):\n    y = helper(2)\n", "plain Python function"),
    ("@triton.constexpr_function\ndef cf(n):\n    return n * 2\n@triton.jit\ndef k(x):\n    y = cf(2)\n",
     "constexpr_function"),
    ("from elsewhere import thing\n@triton.jit\ndef k(x):\n    y = thing\n", "not found next to the file"),
    ("@triton.jit\ndef k(x):\n    y = missing_name\n", "not defined at module level"),
    ("def outer():\n    @triton.jit\n    def k(x):\n        pass\n", "inside a function"),
    ("def k(x):\n    pass\n", "not decorated with @triton.jit"),
    ("if FLAG:\n    X: tl.constexpr = 1\nelse:\n    X: tl.constexpr = 2\n@triton.jit\ndef k(x):\n    y = X\n",
     "differently under conditions"),
])
def test_extract_reports_what_cannot_be_carried(tmp_path, body, words):
    path = _write(tmp_path, "m.py", "import triton\nimport triton.language as tl\n" + body)
    with pytest.raises(ExtractError, match=words) as info:
        extract_kernel(path, "k")
    assert info.value.function == "k"


def test_scratch_module_loads_and_exposes_a_jit_function(tmp_path):
    triton = pytest.importorskip("triton")
    s = extract_kernel(ENGINE / "attention" / "mla_decode.py", "_mla_grouped_stage1")
    path = s.write(tmp_path)
    assert path.name == f"{s.name}.py" and path.read_text() == s.source
    mod = s.load(tmp_path)
    assert isinstance(getattr(mod, s.kernel), triton.runtime.JITFunction)
    assert sys.modules[s.name] is mod


def test_python_files_without_targets_report_nothing(cli):
    """Call sites are judged against targets only: without one nothing is reported, and the
    summary says that nothing was judged rather than that the checks passed (issue 19)."""
    result = cli("check", "--isolated", str(ENGINE))
    assert result.exit_code == 0, result.output
    assert "All checks passed" not in result.output
    assert "Nothing judged: 13 Python files and no target" in result.output


def test_json_only_folders_are_unchanged(tmp_path):
    from tilefit.api import CheckOptions, run_check
    from tilefit.config import Settings

    (tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json").write_text(
        '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
        '"num_warps": 4, "num_stages": 3}}')
    result = run_check([str(tmp_path)], CheckOptions(estimator="analytic"), Settings())
    assert result.files_checked == 1 and result.diagnostics == []


# -- launch-like plans (no compile) -------------------------------------------------------------------

def test_launch_like_plan_of_the_mla_launch(sites, project):
    from tilefit.callsites.evaluate import CallsiteEvaluator, launch_cases

    key = "engine.attention.mla_decode:_mla_grouped_stage1"
    ev = CallsiteEvaluator(project, kernels={key: {"kv_cache": ["bf16", "fp8e4nv"], "kv_group_num": [16],
                                                   "q_head_num": [16], "NUM_KV_SPLITS": [4]}}, triton=False)
    (site,) = _site(sites, "_mla_grouped_stage1")
    (case,) = launch_cases(site)
    fp8 = ev.variants(site.kernel)[1]
    args, warps, stages, options = ev.plan(case, fp8, "sm_89")
    got = {a.name: (a.kind, a.value) for a in args}
    assert [a.name for a in args] == [p.name for p in site.kernel.params]  # every argument, in order
    assert got["Q"] == ("ptr", "bf16") and got["kv_cache"] == ("ptr", "fp8e4nv")
    assert got["Req_to_tokens"] == ("ptr", "i32") and got["kv_scale"] == ("ptr", "fp32")
    assert got["Att_Out"] == ("ptr", "bf16")  # an output beside a table: bf16 unless the table says
    assert got["sm_scale"][0] == "float" and got["stride_qh"] == ("int", 4096)
    assert got["BLOCK_N"] == ("constexpr", 32) and got["kv_group_num"] == ("constexpr", 16)
    assert (warps, stages, options) == (4, 2, ())
    # without Triton, a kernel that is not one of ours cannot be evaluated: the reason says so
    from tilefit.device_db import load_database

    out = ev.run(case, fp8, load_database().get("rtx4090"))
    assert out.status == "unknown" and "Triton is not installed" in out.detail


def test_heuristics_are_folded_statically(tmp_path):
    from tilefit.callsites.evaluate import CallsiteEvaluator, launch_cases

    (tmp_path / "h.py").write_text(
        "import triton\nimport triton.language as tl\n"
        "@triton.heuristics({'EVEN_K': lambda args: args['K'] % args['BLOCK_K'] == 0,\n"
        "                    'BLOCK_N': lambda args: triton.next_power_of_2(args['N'])})\n"
        "@triton.jit\ndef k(x_ptr, K, N, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr, BLOCK_N: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK_K)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs))\n"
        "def run(x, n):\n"
        "    k[(1,)](x, 4000, 100, BLOCK_K=64)\n"
        "    k[(1,)](x, 4096, n, BLOCK_K=64)\n")
    project = Project.scan([str(tmp_path / "h.py")])
    first, second = build_sites(project).launches
    ev = CallsiteEvaluator(project, triton=False)
    variant = ev.variants(first.kernel)[0]
    args, *_ = ev.plan(launch_cases(first)[0], variant, "sm_89")
    got = {a.name: a.value for a in args}
    assert got["EVEN_K"] is False and got["BLOCK_N"] == 128 and got["K"] == 4000
    # N unknown at the second launch: its launch-like value is used (4096 -> BLOCK_N 4096)
    args, *_ = ev.plan(launch_cases(second)[0], variant, "sm_89")
    got = {a.name: a.value for a in args}
    assert got["EVEN_K"] is True and got["BLOCK_N"] == 4096


def test_reference_kernel_names_fall_back_to_the_analytic_model(tmp_path):
    from tilefit.callsites.evaluate import CallsiteEvaluator, launch_cases
    from tilefit.device_db import load_database
    from tilefit.estimate import Estimator

    (tmp_path / "moe.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n"
        "LIMIT = torch.finfo(torch.float8_e4m3fn).max\n"
        "@triton.jit\ndef fused_moe_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK_SIZE_M: tl.constexpr,\n"
        "                     BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,\n"
        "                     GROUP_SIZE_M: tl.constexpr, use_fp8_w8a8: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK_SIZE_K)\n"
        "    a = tl.load(a_ptr + offs[:, None] + offs[None, :])\n"
        "    b = tl.load(b_ptr + offs[:, None] + offs[None, :])\n"
        "    tl.store(c_ptr + offs[:, None] + offs[None, :], tl.dot(a, b) * LIMIT)\n"
        "def launch(a, b, c):\n"
        "    fused_moe_kernel[(1,)](a, b, c, 4096, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128,\n"
        "                           GROUP_SIZE_M=32, use_fp8_w8a8=True, num_warps=8, num_stages=4)\n")
    project = Project.scan([str(tmp_path / "moe.py")])
    (site,) = build_sites(project).launches
    ev = CallsiteEvaluator(project, estimator=Estimator("analytic"), triton=False,
                           kernels={"moe:fused_moe_kernel": {"a_ptr,b_ptr": ["fp8e4nv"]}})
    out = ev.run(launch_cases(site)[0], ev.variants(site.kernel)[0], load_database().get("rtx4090"))
    # SGLang's fp8 default on sm_89: (4 - 1) * (128 + 256) * 128 bytes (sglang PR#28038)
    assert out.ok and out.shared == 147456 and out.estimator.startswith("analytic")


def test_config_dicts_from_a_default_config_function_give_one_instance_per_branch():
    project = Project.scan([str(ENGINE / "ops" / "default_config.py")])
    (site,) = build_sites(project).launches
    got = [(i.label, _lit(i.args["BLOCK_N"]), _lit(i.options["num_stages"])) for i in site.instances]
    assert got == [("config of line 9", 256, 4), ("config of line 11", 64, 3), ("config of line 13", 128, 3)]
    assert site.problems == [] and site.kernel.name == "matmul_plain_kernel"  # found on demand in gemm_plain.py
