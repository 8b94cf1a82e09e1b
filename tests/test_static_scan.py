"""Static means static: no code of a scanned file runs, whatever the estimator (issue 18).

Each attack is a small package whose kernel, helper, constant, default or file *name* would run
Python (write a marker file) if tilefit imported the file, loaded a scratch module built from its
text, or let Triton call what the kernel names while compiling. ``tilefit check`` runs on each
with every estimator; the marker must never appear, and the launch is reported as EST002 naming
what blocked it, with the ``--allow-import`` hint. The engines' real kernels still pass the
allowlist (where their sources are at hand).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings
from tilefit.pysource.extract import ExtractError, extract_kernel

ESTIMATORS = ("analytic", "exact", "auto")

HEAD = "import triton\nimport triton.language as tl\n"
KERNEL = '''
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr{extra_param}):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    {body}
    tl.store(y_ptr + offs, x, mask=offs < n)


def launch(x, y):
    scale_kernel[(1,)](x, y, 1024, BLOCK=128, num_warps=4, num_stages=2)
'''


def _kernel(body: str = "x = x * 2", extra_param: str = "", head: str = HEAD, before: str = "") -> str:
    return head + before + KERNEL.format(body=body, extra_param=extra_param)


def _touch(marker: Path) -> str:
    return f"__import__('os').system('touch {marker}')"


def _attacks(marker: Path) -> dict[str, dict[str, str]]:
    """name -> {file name: content}; every attack writes ``marker`` if any of it runs."""
    touch = _touch(marker)
    # four form feeds above the kernel: a reader that slices `splitlines()` by the AST's line
    # numbers starts four lines early, at the decoy (whose default runs when its text is loaded)
    decoy = "\x0c\x0c\x0c\x0c\ndef decoy(x=" + touch + "):\n    return x\n"
    long_body = "x = x * 2\n    x = x + 1\n    x = x - 1\n    x = x * 1\n    x = x + 0"
    return {
        # issue 18, Why 1: the four attacks of the report
        "knobs_os_system_in_kernel": {"k.py": _kernel(f"triton.knobs.os.system('touch {marker}')")},
        "constexpr_default_call": {"k.py": _kernel(extra_param=f", EXTRA: tl.constexpr = {touch}")},
        "decoy_after_form_feed": {"k.py": _kernel(long_body, before=decoy)},
        "file_name_with_code": {"x\nimport os; os.system('touch pwned')\n#.py": _kernel()},
        # ours
        "tl_shadowed_by_knobs": {"k.py": _kernel(f"tl.os.system('touch {marker}')",
                                                 head="import triton\nfrom triton import knobs as tl\n")},
        "tl_shadowed_by_assignment": {"k.py": _kernel(f"tl.system('touch {marker}')",
                                                      head=HEAD + "tl = __import__('os')\n")},
        "dunder_import_in_kernel": {"k.py": _kernel(f"__import__('os').system('touch {marker}')")},
        "chain_through_tl_core_knobs": {"k.py": _kernel(f"tl.core.knobs.os.system('touch {marker}')")},
        "chain_through_tl_core_builtins": {"k.py": _kernel(f"tl.core.builtins.exec(\"{touch}\")")},
        "constant_holding_triton_knobs": {"k.py": _kernel(f"K.os.system('touch {marker}')",
                                                          head=HEAD + "K = triton.knobs\n")},
        "dunder_attribute_walk": {"k.py": _kernel(
            "x.__class__.__init__.__globals__['os'].system('touch " + str(marker) + "')")},
        "getattr_dunder": {"k.py": _kernel(f"getattr(x, '__class__')")},
        "exec_in_helper": {"k.py": HEAD + f'''
@triton.jit
def helper(x):
    exec("{touch}")
    return x
''' + KERNEL.format(body="x = helper(x)", extra_param="")},
        "jit_decorator_hook": {"k.py": _kernel().replace(
            "@triton.jit\ndef scale_kernel", f"@triton.jit(launch_metadata=lambda *a: {touch})\ndef scale_kernel")},
        "annotation_call": {"k.py": _kernel(extra_param=f", EXTRA: {touch} = 1")},
        # what Triton itself would call at launch: a heuristics lambda, an autotuner's prune function,
        # a grid lambda; a package __init__ with code; a caller's default that is a call
        "heuristics_lambda": {"k.py": _kernel().replace(
            "@triton.jit\ndef scale_kernel", f"@triton.heuristics({{'BLOCK': lambda a: {touch}}})\n@triton.jit\n"
            "def scale_kernel").replace(", BLOCK=128", "")},
        "autotune_prune_function": {"k.py": HEAD + f"\ndef prune(configs, nargs, **kw):\n    {touch}\n    return configs\n"
                                    + _kernel(head="").replace(
            "@triton.jit\ndef scale_kernel", "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4, "
            "num_stages=2)], key=['n'], prune_configs_by={'early_config_prune': prune})\n@triton.jit\ndef scale_kernel"
        ).replace(", BLOCK=128, num_warps=4, num_stages=2", "")},
        "grid_lambda": {"k.py": _kernel().replace("scale_kernel[(1,)]", f"scale_kernel[lambda META: ({touch},)]")},
        "package_init": {"__init__.py": touch + "\n", "k.py": _kernel()},
        "caller_default_call": {"k.py": _kernel().replace("def launch(x, y):", f"def launch(x, y, b={touch}):")
                                .replace("BLOCK=128", "BLOCK=b")},
        "site_files": {
            "k.py": _kernel(),
            "conftest.py": touch + "\n",
            "sitecustomize.py": touch + "\n",
            "usercustomize.py": touch + "\n",
            "evil.pth": "import os; " + touch + "\n",
            "triton.py": touch + "\n",
        },
    }


BLOCKED = {  # what the EST002 message must name
    "knobs_os_system_in_kernel": "triton.knobs",
    "constexpr_default_call": "parameter default of scale_kernel",
    "tl_shadowed_by_knobs": "not part of triton.language (triton.knobs",
    "tl_shadowed_by_assignment": "computed by Python code",
    "dunder_import_in_kernel": "__import__",
    "constant_holding_triton_knobs": "triton.knobs",
    "dunder_attribute_walk": "a dunder attribute",
    "getattr_dunder": "getattr",
    "exec_in_helper": "exec",
    "annotation_call": "__import__",
}
NEEDS_TRITON_TO_BLOCK = {  # refused when the member is resolved (in the compile worker)
    "chain_through_tl_core_knobs": "core.knobs is the module triton.knobs",
    "chain_through_tl_core_builtins": "core.builtins is the module builtins",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


@pytest.mark.parametrize("attack", sorted(_attacks(Path("/m"))))
def test_no_attack_runs_with_any_estimator(tmp_path, monkeypatch, attack):
    marker = tmp_path / "MARKER"
    pkg = _write(tmp_path / "tree", _attacks(marker)[attack])
    monkeypatch.chdir(pkg)  # the file-name attack touches ./pwned
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    for estimator in ESTIMATORS:
        result = run_check([str(pkg)], CheckOptions(targets=["rtx4090"], estimator=estimator), Settings())
        assert not marker.exists() and not (pkg / "pwned").exists(), (attack, estimator)
        est002 = [d for d in result.diagnostics if d.code == "EST002"]
        if attack in BLOCKED:
            assert est002, (attack, estimator, [d.message for d in result.diagnostics])
            assert BLOCKED[attack] in est002[0].message and "--allow-import" in est002[0].message, est002[0].message
        elif attack in NEEDS_TRITON_TO_BLOCK and estimator != "analytic":
            pytest.importorskip("triton")
            assert est002 and NEEDS_TRITON_TO_BLOCK[attack] in est002[0].message, [d.message for d in est002]
    assert not any(m == "pkg" or m.startswith("pkg.") for m in sys.modules)


def test_cli_in_a_hostile_tree_runs_nothing(tmp_path):
    """The console script run from inside the tree (its cwd holds conftest.py, sitecustomize.py,
    a .pth, a triton.py), with every estimator and JSON output that stays parseable."""
    marker = tmp_path / "MARKER"
    files = {}
    for name in ("knobs_os_system_in_kernel", "site_files", "decoy_after_form_feed"):
        for fname, text in _attacks(marker)[name].items():
            files[f"{name}_{fname}" if fname.endswith(".py") and fname not in (
                "conftest.py", "sitecustomize.py", "usercustomize.py", "triton.py") else fname] = text
    pkg = _write(tmp_path / "tree", files)
    exe = Path(sys.executable).with_name("tilefit")
    if not exe.exists():
        pytest.skip("no tilefit console script next to the interpreter")
    env = dict(os.environ, TILEFIT_CACHE_DIR=str(tmp_path / "cache"))
    for estimator in ESTIMATORS:
        proc = subprocess.run([str(exe), "check", ".", "--target", "rtx4090", "--estimator", estimator,
                               "--output-format", "json"], cwd=pkg, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        import json

        json.loads(proc.stdout)
        assert not marker.exists(), estimator


def test_scratch_module_is_built_from_validated_nodes_only(tmp_path):
    marker = tmp_path / "MARKER"
    pkg = _write(tmp_path / "tree", _attacks(marker)["decoy_after_form_feed"])
    scratch = extract_kernel(pkg / "k.py", "scale_kernel")
    assert "os.system" not in scratch.source and "decoy" not in scratch.source and "\x0c" not in scratch.source
    assert "k.py" not in scratch.source and str(tmp_path) not in scratch.source
    odd = pkg / "y\n\"\"\"\nimport os #.py"
    odd.write_text(_kernel())
    text = extract_kernel(odd, "scale_kernel").source
    assert "import os" not in text
    compile(text, "scratch", "exec")


@pytest.mark.parametrize("attack", sorted(BLOCKED))
def test_extraction_names_what_blocked_it(tmp_path, attack):
    pkg = _write(tmp_path / "tree", _attacks(tmp_path / "M")[attack])
    with pytest.raises(ExtractError) as info:
        extract_kernel(pkg / "k.py", "scale_kernel")
    assert BLOCKED[attack] in info.value.reason


ENGINES = Path("/work/engines/src")
ENGINE_KERNELS = [
    ("vllm-0.33.0/vllm/model_executor/layers/fused_moe/fused_moe.py", "fused_moe_kernel"),
    ("vllm-0.33.0/vllm/model_executor/layers/quantization/utils/fp8_utils.py", "_w8a8_triton_block_scaled_mm"),
    ("vllm-0.33.0/vllm/v1/attention/ops/triton_decode_attention.py", "_fwd_grouped_kernel_stage1"),
    ("vllm-0.33.0/vllm/v1/attention/ops/triton_decode_attention.py", "_fwd_kernel_stage1"),
    ("sglang-0.5.23/sglang/kernels/ops/moe/fused_moe_triton_kernels.py", "fused_moe_kernel"),
    ("sglang-0.5.23/sglang/kernels/ops/gemm/fp8_kernel.py", "_w8a8_block_fp8_matmul"),
    ("sglang-0.5.23/sglang/kernels/ops/attention/decode_attention.py", "_fwd_grouped_kernel_stage1"),
    # FP8_MIN/FP8_MAX defaults read `float8_info = torch.finfo(current_platform.fp8_dtype())`
    ("vllm-0.33.0/vllm/v1/attention/ops/triton_unified_attention.py", "kernel_unified_attention"),
    ("vllm-0.33.0/vllm/v1/attention/ops/triton_merge_attn_states.py", "merge_attn_states_kernel"),
]


@pytest.mark.parametrize("rel,function", ENGINE_KERNELS)
def test_engine_kernels_pass_the_allowlist(rel, function):
    path = ENGINES / rel
    if not path.is_file():
        pytest.skip(f"engine source not at hand: {path}")
    scratch = extract_kernel(path, function)
    assert scratch.kernel == function and scratch.members
    pytest.importorskip("triton")
    scratch.check()  # every triton.language path resolves inside Triton


FINFO_KERNEL = HEAD + """import torch
from vllm.platforms import current_platform

float8_info = torch.finfo(current_platform.fp8_dtype())
bf16_info = torch.finfo(torch.bfloat16)
{extra}

@triton.jit
def clamp_kernel(x_ptr, n, BLOCK: tl.constexpr, FP8_MIN: tl.constexpr = float8_info.min,
                 FP8_MAX: tl.constexpr = float8_info.max):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    x = tl.clamp(x, FP8_MIN, FP8_MAX) * bf16_info.eps
    tl.store(x_ptr + offs, x, mask=offs < n)
"""


def test_torch_finfo_globals_are_folded_to_literals_without_importing(tmp_path, monkeypatch):
    # a `torch` and a `vllm` first on the path that would write a marker if anything imported them
    marker = tmp_path / "MARKER"
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in ("torch", "vllm"):
        (tmp_path / mod).mkdir()
        (tmp_path / mod / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('{mod}')\n")
    (tmp_path / "k.py").write_text(FINFO_KERNEL.format(extra=""))
    scratch = extract_kernel(tmp_path / "k.py", "clamp_kernel")
    assert "-448.0" in scratch.source and "448.0" in scratch.source and "0.0078125" in scratch.source
    assert "torch" not in scratch.source and "float8_info" not in scratch.source
    compile(scratch.source, "scratch", "exec")
    assert not marker.exists()
    # a finfo of anything else (a run-time dtype) still blocks, naming the global
    (tmp_path / "k.py").write_text(FINFO_KERNEL.format(extra="").replace("torch.finfo(torch.bfloat16)",
                                                                         "torch.finfo(pick())"))
    with pytest.raises(ExtractError) as info:
        extract_kernel(tmp_path / "k.py", "clamp_kernel")
    assert "bf16_info" in info.value.reason
    # a second binding of the global (it could be anything at run time) blocks too
    (tmp_path / "k.py").write_text(FINFO_KERNEL.format(extra="float8_info = make_info()"))
    with pytest.raises(ExtractError):
        extract_kernel(tmp_path / "k.py", "clamp_kernel")


@pytest.mark.parametrize("ty,e,m,bias,kind", [("fp16", 5, 10, 15, "ieee"), ("bf16", 8, 7, 127, "ieee"),
                                                ("fp32", 8, 23, 127, "ieee"), ("fp8e5", 5, 2, 15, "ieee"),
                                                ("fp8e4nv", 4, 3, 7, "fn"), ("fp8e4b8", 4, 3, 8, "fnuz")])
def test_the_finfo_table_follows_from_the_formats(ty, e, m, bias, kind):
    from tilefit.dtypes import FINFO

    top = 2 ** e - 2 if kind == "ieee" else 2 ** e - 1  # the largest exponent field of a finite number
    # e4m3fn: the all-ones exponent with the all-ones mantissa is NaN; fnuz: only -0 is NaN
    mantissa = 2 - 2 ** -m if kind in ("ieee", "fnuz") else 2 - 2 * 2 ** -m
    f = FINFO[ty]
    assert f["max"] == mantissa * 2.0 ** (top - bias) and f["min"] == -f["max"]
    assert f["eps"] == 2.0 ** -m and f["tiny"] == 2.0 ** (1 - bias)
    assert f["bits"] == 1 + e + m
