"""Compiles with another interpreter's Triton (``calibrate smem --triton-python``, issue 17).

The engine calibrations of Triton 3.4 ... 3.8 are made by one tilefit (with Triton 3.9) whose
compile worker runs in a virtual environment holding only the other Triton release: the child
imports tilefit from the parent's own folders. These tests run that path with this very
interpreter named (CI has one Triton), and check the refusals of interpreters that cannot compile.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from tilefit import versions
from tilefit.smem import interpreter


def fake_python(tmp_path, name: str, info: dict) -> str:
    """An executable that answers the interpreter probe with ``info`` (and nothing else)."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{json.dumps(info)}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


HERE = list(sys.version_info[:2])


@pytest.fixture(autouse=True)
def _no_named_python():
    # interpreter.use() writes os.environ itself: restore by hand (monkeypatch.delenv of a name that
    # is not set records nothing to undo, so a named interpreter leaked into later tests' compiles)
    before = os.environ.pop(interpreter.ENV, None)
    interpreter.describe.cache_clear()
    yield
    os.environ.pop(interpreter.ENV, None)
    if before is not None:
        os.environ[interpreter.ENV] = before
    interpreter.describe.cache_clear()


@pytest.mark.parametrize("info,words", [
    ({"triton": None, "python": HERE, "packaging": True}, "Triton is not installed there"),
    ({"triton": "3.8.0", "python": [3, HERE[1] + 1], "packaging": True}, "the compiles must too"),
    ({"triton": "3.8.0", "python": HERE, "packaging": False}, "'packaging' distribution is not installed"),
])
def test_an_interpreter_that_cannot_compile_is_refused_before_any_compile(tmp_path, info, words):
    python = fake_python(tmp_path, "python", info)
    with pytest.raises(interpreter.InterpreterError, match=words):
        interpreter.use(python)
    assert interpreter.ENV not in os.environ


def test_a_missing_or_silent_interpreter_is_refused(tmp_path):
    with pytest.raises(interpreter.InterpreterError, match="no such interpreter"):
        interpreter.describe(str(tmp_path / "nope"))
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\necho oops >&2\nexit 3\n")
    silent.chmod(0o755)
    with pytest.raises(interpreter.InterpreterError, match="does not run .*oops"):
        interpreter.describe(str(silent))


def test_the_compiles_release_is_the_named_interpreters(tmp_path, monkeypatch):
    python = fake_python(tmp_path, "python", {"triton": "3.4.0", "python": HERE, "packaging": True})
    interpreter.use(python)
    assert os.environ[interpreter.ENV] == python
    assert interpreter.compile_triton_version() == "3.4.0"
    cmd = interpreter.child_command(7)
    assert cmd[0] == python and cmd[1:3] == ["-I", "-c"] and cmd[4] == "7"
    roots = json.loads(cmd[5])
    assert os.path.isfile(os.path.join(roots["tilefit"], "smem", "worker.py"))
    interpreter.use(None)
    assert interpreter.compile_triton_version() == versions.installed_triton()
    assert interpreter.child_command(7)[1:4] == ["-I", "-m", "tilefit.smem.worker"]


def test_the_engine_calibration_refuses_a_release_older_than_3_4(tmp_path):
    pytest.importorskip("triton")
    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem.exact import TritonUnavailable

    interpreter.use(fake_python(tmp_path, "python", {"triton": "3.3.1", "python": HERE, "packaging": True}))
    with pytest.raises(TritonUnavailable, match="Triton is 3.3.1"):
        ec.compile_release()


def test_a_child_under_a_named_interpreter_compiles_the_same_bytes(monkeypatch):
    """The bootstrap child (tilefit found through the parent's folders, ``python -I -c``) gives the
    figure the usual ``-m tilefit.smem.worker`` child gives."""
    pytest.importorskip("triton")
    from tilefit.kernels.spec import make_spec
    from tilefit.smem.worker import CompileWorker, compile_spec_limited

    spec = make_spec("fused_moe", "bf16", {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64},
                     num_warps=4, num_stages=3)
    plain = CompileWorker()
    try:
        want = compile_spec_limited(spec, "sm_89", worker=plain, timeout=300)
    finally:
        plain.close()
    interpreter.use(sys.executable)
    named = CompileWorker()
    try:
        got = compile_spec_limited(spec, "sm_89", worker=named, timeout=300)
        assert named._proc.popen.args[1:3] == ["-I", "-c"]
    finally:
        named.close()
    assert want.error is None and got.error is None, (want.error, got.error)
    assert got.shared_bytes == want.shared_bytes > 0
    assert got.triton_version == versions.installed_triton()


def test_cli_options_that_go_with_engine(cli, tmp_path):
    python = fake_python(tmp_path, "python", {"triton": None, "python": HERE, "packaging": True})
    r = cli("calibrate", "smem", "--triton-python", python)
    assert r.exit_code == 2 and "--triton-python goes with --engine" in r.output
    r = cli("calibrate", "smem", "--triton-python", python, "--engine", "vllm==0.33.0", "--probe-from", "3.9")
    assert r.exit_code == 2 and "Triton is not installed there" in r.output
    r = cli("calibrate", "smem", "--no-fresh")
    assert r.exit_code == 2 and "--no-fresh and --risk-share go with --engine and --probe-from" in r.output
