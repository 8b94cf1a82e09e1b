"""The compile child is isolated from the folder being scanned (issue 18): ``python -I`` (no
current folder, ``PYTHONPATH`` or user site on ``sys.path``), a temporary working folder, a
scrubbed environment, and the compiler's output in a log, never on tilefit's stdout/stderr."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tilefit.smem.worker import CompileWorker, result_of, scrubbed_env


def test_the_environment_is_scrubbed(tmp_path):
    env = scrubbed_env(str(tmp_path), {"PATH": "/usr/bin", "PYTHONPATH": "/evil", "PYTHONSTARTUP": "/evil/x.py",
                                       "HOME": "/root", "TRITON_CACHE_DIR": "/c", "LD_PRELOAD": "/evil.so",
                                       "MLIR_ENABLE_DUMP": "1", "SECRET_TOKEN": "x"})
    assert env["PATH"] == "/usr/bin" and env["TRITON_CACHE_DIR"] == "/c" and env["MLIR_ENABLE_DUMP"] == "1"
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert not {"PYTHONPATH", "PYTHONSTARTUP", "LD_PRELOAD", "SECRET_TOKEN"} & set(env)


def test_a_hostile_folder_on_the_path_and_in_the_cwd_runs_nothing(tmp_path, monkeypatch, capfd):
    pytest.importorskip("triton")
    from tilefit.kernels.spec import make_spec

    evil = tmp_path / "tree"
    evil.mkdir()
    marker = tmp_path / "MARKER"
    touch = f"open({str(marker)!r}, 'w').write('ran')\n"
    for name in ("sitecustomize.py", "usercustomize.py", "triton.py", "tilefit.py", "conftest.py"):
        (evil / name).write_text(touch)
    (evil / "evil.pth").write_text("import os; " + touch)
    monkeypatch.chdir(evil)
    monkeypatch.setenv("PYTHONPATH", str(evil))
    monkeypatch.setenv("PYTHONSTARTUP", str(evil / "sitecustomize.py"))
    spec = make_spec("fused_moe", "fp16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=1),
                     num_warps=4, num_stages=2)
    worker = CompileWorker()
    try:
        out = result_of(worker.request(("spec", spec, "sm_89", "alloc"), 300), "sm_89", 4)
        assert out.error is None and out.shared_bytes == 8192, out
        folder = Path(worker._proc.folder)
        assert Path(os.path.realpath(folder)).parent != evil  # a temporary working folder
        # a kernel that prints while it compiles (tl.static_print): the text goes to the child's log
        src = tmp_path / "printing.py"
        src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                       "def printing_kernel(x_ptr, BLOCK: tl.constexpr):\n"
                       "    tl.static_print('TILEFIT_COMPILER_SAYS', BLOCK)\n"
                       "    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, offs)\n")
        from tilefit.kernels.plan import Arg, LaunchPlan
        from tilefit.pysource.extract import extract_kernel
        from tilefit.smem.worker import compile_plan_limited

        scratch = extract_kernel(src, "printing_kernel")
        scratch.write()
        plan = LaunchPlan("printing", scratch.name, "printing_kernel",
                          (Arg("x_ptr", "ptr", "fp32"), Arg("BLOCK", "constexpr", 128)), 4, 1)
        got = compile_plan_limited(plan, "sm_89", source=scratch, worker=worker)
        assert got.error is None, got.error
        log = (folder / "compiler.log").read_text(errors="replace")
        assert "TILEFIT_COMPILER_SAYS" in log
    finally:
        worker.close()
    assert not folder.exists()  # removed with the child
    assert not marker.exists()
    captured = capfd.readouterr()
    assert "TILEFIT_COMPILER_SAYS" not in captured.out + captured.err
