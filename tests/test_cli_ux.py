"""What users of ruff and pre-commit expect (issue 19): --statistics as JSON, stdin with
--stdin-filename, --color/NO_COLOR, a progress bar only on a terminal, the wording fixes, and
Python files checked without a target or with a kernel imported from outside the scan."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings

REPO = Path(__file__).resolve().parents[1]
NAME = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
OVER = ('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, '
        '"num_warps": 8, "num_stages": 4}}\n')


@pytest.fixture
def table(tmp_path):
    p = tmp_path / NAME
    p.write_text(OVER)
    return p


def test_statistics_honours_output_format_json(cli, table):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--statistics",
            "--output-format", "json")
    assert r.exit_code == 1
    assert json.loads(r.stdout) == [{"code": "SMEM001", "name": "shared-memory-per-block", "count": 1,
                                     "fixable": True}]


def test_stdin_with_a_filename_is_checked_like_the_file(cli, table):
    on_disk = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic")
    r = cli("check", "-", "--stdin-filename", str(table), "--isolated", "-t", "rtx4090", "--estimator", "analytic",
            input=OVER)
    # the same report, less the hint to run --fix (refused on stdin: there is no file to rewrite)
    hint = "Run `tilefit check --fix`"
    assert hint in on_disk.stdout and hint not in r.stdout
    assert r.exit_code == 1 and r.stdout.splitlines() == [ln for ln in on_disk.stdout.splitlines() if hint not in ln]
    assert cli("check", "-", "--isolated", input=OVER).exit_code == 2  # no name: no engine, no device
    r = cli("check", "-", "--stdin-filename", "notes.txt", "--isolated", input="x")
    assert r.exit_code == 2 and "not a tuning-config file name" in r.output
    r = cli("check", "-", "--stdin-filename", str(table), "--fix", "--isolated", input=OVER)
    assert r.exit_code == 2 and "not on stdin" in r.output
    assert table.read_text() == OVER


def test_color_always_never_and_no_color(cli, table, monkeypatch):
    args = ("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic")
    assert "\x1b[" not in cli(*args).stdout  # auto: the runner's stream is not a terminal
    coloured = cli(*args, "--color", "always").stdout
    assert "\x1b[1;31mSMEM001\x1b[0m" in coloured and f"\x1b[1m{table}:1:" in coloured
    assert "\x1b[" not in cli(*args, "--color", "never").stdout
    json_out = cli(*args, "--color", "always", "--output-format", "json").stdout
    assert "\x1b[" not in json_out  # machine formats never
    from tilefit.style import use_color

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color("auto", Tty()) and not use_color("auto", io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color("auto", Tty()) and use_color("always", io.StringIO())


def test_progress_bar_only_on_a_terminal(table, monkeypatch):
    from tilefit.progress import Progress, for_terminal

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert for_terminal(io.StringIO()) is None
    monkeypatch.setenv("TERM", "dumb")
    assert for_terminal(Tty()) is None
    monkeypatch.setenv("TERM", "xterm")
    stream = Tty()
    bar = for_terminal(stream, delay=0.0)
    assert isinstance(bar, Progress)
    run_check([str(table)], CheckOptions(targets=["rtx4090"], estimator="analytic", progress=bar, use_cache=False),
              Settings())
    bar.close()
    text = stream.getvalue()
    assert "\r[" in text and "1/1 files" in text and text.endswith("\r")  # drawn, then erased
    quiet = Tty()
    late = Progress(quiet, delay=60.0)  # a run shorter than the delay draws nothing
    run_check([str(table)], CheckOptions(targets=["rtx4090"], estimator="analytic", progress=late, use_cache=False),
              Settings())
    late.close()
    assert quiet.getvalue() == ""


def test_cli_progress_never_reaches_a_pipe(cli, table):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic")
    assert "\r" not in r.output


def test_key001_says_what_the_engine_does_with_keys_int_accepts(tmp_path):
    path = tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    path.write_text('{" 2": {}, "-1": {}, "1k": {}}')
    result = run_check([str(path)], CheckOptions(select=["KEY001"]), Settings())
    by_key = {d.pointer: d for d in result.diagnostics}
    assert by_key["/ 2"].severity.value == "warning" and "int() reads it as 2 (it loads)" in by_key["/ 2"].message
    assert by_key["/-1"].severity.value == "warning" and "reads it as -1, a batch size no call has" in by_key["/-1"].message
    assert by_key["/1k"].severity.value == "error" and "raises ValueError" in by_key["/1k"].message


def test_name001_has_no_double_negative(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=bf16.json"
    path.write_text("{}")
    (d,) = run_check([str(path)], CheckOptions(select=["NAME001"]), Settings()).diagnostics
    assert d.message.startswith("neither SGLang nor vLLM loads a file of this name")


def test_name001_when_the_folder_names_the_engine_that_never_loads_the_file(tmp_path):
    """A table in vLLM's configs folder with SGLang's spaced block_shape: judged as SGLang's (the
    name's mark), and vLLM, which asks for ``block_shape=[128,128]``, never loads it."""
    name = "E=64,N=1536,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[{}].json"
    found = {}
    for engine, shape in (("vllm", "128, 128"), ("vllm", "128,128"), ("sglang", "128, 128")):
        folder = tmp_path / engine / shape.replace(", ", "_") / engine / "configs"
        folder.mkdir(parents=True)
        path = folder / name.format(shape)
        path.write_text("{}")
        found[engine, shape] = [d.message for d in
                                run_check([str(path)], CheckOptions(select=["NAME001"]), Settings()).diagnostics]
    assert found["vllm", "128, 128"] == [
        "the file is in a vllm folder, but vllm never loads a file of this name: vLLM writes block_shape without a "
        "space ([128,128]) (judged as a sglang table, the engine its name points to)"]
    assert found["vllm", "128,128"] == [] and found["sglang", "128, 128"] == []


def test_fix_margin_help_names_the_setting(cli):
    r = cli("check", "--help")
    assert "[default: `fix-margin` in [tool.tilefit], else 0]" in " ".join(r.output.split())


def test_fix_report_names_entries_and_errors(tmp_path):
    from tilefit.app import run_fix
    from tilefit.fix.report import markdown

    # one entry that overflows two ways: 196608 B on the 4090 (sm_89), 245760 B on the H100 (sm_90)
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                    '"num_warps": 4, "num_stages": 5}}\n')
    result = run_fix([str(path)], CheckOptions(targets=["h100-sxm"], estimator="analytic"), Settings(), write=False)
    errors = sum(result.fixed.values())
    text = markdown(result, applied=False)
    assert errors == 2 and "**1 entry**" in text and "clearing **2 errors**" in text


def test_python_files_without_a_target_say_nothing_was_judged(cli, tmp_path):
    from tilefit.rules.smem002_launch_shared_memory import GEMM_KERNEL

    (tmp_path / "k.py").write_text(GEMM_KERNEL + "\n\ndef go(a, b, c, M, N, K):\n    matmul_kernel[(1, 1)](a, b, c, M, N, K, "
                                   "1, 1, 1, 1, 1, 1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, "
                                   "num_stages=4)\n")
    r = cli("check", tmp_path / "k.py", "--isolated")
    assert r.exit_code == 0 and "All checks passed" not in r.output
    assert "Nothing judged: 1 Python file and no target (use `--target DEVICE`" in r.output


def test_launch_of_a_kernel_from_a_folder_without_init(cli, tmp_path):
    """`from kernels.gemm import matmul_kernel` in app/run.py, kernels/ without __init__.py: found
    from a folder above the importer; an import found nowhere is an EST002, not silence."""
    pytest.importorskip("triton", reason="the launch is judged by compiling the kernel")
    from tilefit.rules.smem002_launch_shared_memory import GEMM_KERNEL

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "gemm.py").write_text(GEMM_KERNEL)
    (tmp_path / "app").mkdir()
    launch = ("    matmul_kernel[(1, 1)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), "
              "c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)\n")
    (tmp_path / "app" / "run.py").write_text("from kernels.gemm import matmul_kernel\n\n\ndef go(a, b, c, M, N, K):\n"
                                            + launch)
    (tmp_path / "app" / "lost.py").write_text("from nowhere.gemm import matmul_kernel\n\n\ndef go(a, b, c, M, N, K):\n"
                                             + launch)
    for args in ((tmp_path / "app" / "run.py",), (tmp_path,)):
        r = cli("check", *args, "--isolated", "-t", "rtx4090")
        assert "SMEM002" in r.output and "Required: 147456" in r.output, r.output
    r = cli("check", tmp_path / "app" / "lost.py", "--isolated", "-t", "rtx4090")
    assert r.exit_code == 0 and "EST002" in r.output
    assert "matmul_kernel is imported from nowhere.gemm, which is not in the scanned tree" in r.output


def test_probe_draws_its_compiles_on_a_terminal(cli, monkeypatch, tmp_path):
    """A probe sweep compiles (seconds to minutes): on a terminal its points are counted on stderr."""
    pytest.importorskip("triton", reason="the exact probe compiles")
    import tilefit.progress as progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(progress, "for_terminal", lambda s, delay=1.0: progress.Progress(stream, delay=0.0))
    r = cli("probe", "fused_moe", "--tile", "64,128,128", "--warps", "4", "--stages", "2,3", "--arch", "sm_89",
            "--estimator", "exact", "--jobs", "1")
    assert r.exit_code == 0, r.output
    text = stream.getvalue()
    assert "0/2 compiling" in text and "2/2 compiling" in text and text.endswith("\r")


def test_write_json_puts_one_row_per_line_in_the_indented_document():
    """json, sarif and gitlab write their diagnostics one per line through json's C encoder (the
    indenting encoder is pure Python: slower than a whole warm check on a large audit)."""
    from tilefit.reporters.common import ROWS, write_json

    rows = [{"code": "SMEM001", "data": {"targets": ["rtx4090", "rtx5090"]}}, {"code": "KEY001", "fix": None}]
    doc = {"version": "2.1.0", "runs": [{"tool": {"name": "tilefit"}, "results": ROWS, "after": 1}]}
    out = io.StringIO()
    write_json(doc, out, rows)
    text = out.getvalue()
    assert json.loads(text) == {"version": "2.1.0", "runs": [{"tool": {"name": "tilefit"}, "results": rows, "after": 1}]}
    lines = text.splitlines()
    assert lines[lines.index('      "results": [') + 1] == '        ' + json.dumps(rows[0]) + ","
    assert '      ],' in lines and text.endswith("}\n")
    out = io.StringIO()
    write_json(ROWS, out, [])
    assert out.getvalue() == "[]\n"
    out = io.StringIO()
    write_json(ROWS, out, rows)
    assert out.getvalue() == "[\n" + ",\n".join("  " + json.dumps(r) for r in rows) + "\n]\n"


# a kernel family of our own with no closed form at all (tests/kernels/tiny_gemm): auto compiles
# its entries (every bundled family now has calibrated forms where the corpus touches it)
TINY = Path(__file__).parent / "kernels" / "tiny_gemm"
TINY_TABLE = "tiny_gemm,N=4096,K=4096,device_name=NVIDIA_GB10,dtype=fp16.json"


def test_a_run_that_compiles_deferred_points_shows_one_bar(cli, monkeypatch, tmp_path, request):
    """``--estimator auto`` compiles what no proven form answers between two passes over the
    files: files, compiles and files again are phases of one bar on one line (there were two
    progress classes, and a second bar under the first)."""
    pytest.importorskip("triton", reason="auto compiles")
    import tilefit.progress as progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    from tilefit import kernels

    folder = tmp_path / "families" / "tiny_gemm"
    shutil.copytree(TINY, folder)
    entry = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "num_warps": 4, "num_stages": 2}
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / TINY_TABLE).write_text(json.dumps({"1": entry}, indent=4) + "\n")
    registered = kernels.registered(folder.parent)
    registered.__enter__()
    request.addfinalizer(lambda: registered.__exit__(None, None, None))
    stream = Tty()
    made = []

    def bar(s, delay=1.0):
        made.append(progress.Progress(stream, delay=0.0))
        return made[-1]

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(progress, "for_terminal", bar)
    r = cli("check", tmp_path / "t", "--isolated", "--no-cache")
    assert r.exit_code in (0, 1), r.output
    text = stream.getvalue()
    assert len(made) == 1  # the CLI's bar; run_check made none of its own
    assert "compiling kernels without a proven closed form" in text, text
    assert "1/1 files" in text
    # every stage redrew the same line, and the line was erased at the end
    assert "\n" not in text and text.endswith("\r")
    compiles = [part for part in text.split("\r") if "compiling kernels" in part]
    assert any(f"] {n}/{n} compiling" in part for part in compiles for n in range(1, 9)), compiles


def test_calibration_stages_log_off_a_terminal_and_keep_their_line_on_one():
    """The calibrations' bars (``progress.factory``): off a terminal nothing is drawn and the log
    gets each stage's end; on one, a finished stage's line stays above the next."""
    from tilefit import progress

    logged = []
    silent = io.StringIO()
    make = progress.factory(log=logged.append, stream=silent)
    bar = make("fused_moe: fit points", 3)
    bar(0, 3)
    bar(2, 3)
    assert logged == []  # not yet `every` seconds, not done
    bar(3, 3)
    bar(3, 3)  # a repeated last call logs nothing more
    assert silent.getvalue() == "" and len(logged) == 1
    assert logged[0].startswith("[" + "#" * progress.WIDTH + "] 3/3 fused_moe: fit points (")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    make = progress.factory(stream=tty)
    for label in ("a: probe", "b: probe"):
        bar = make(label, 2)
        bar(1, 2)
        bar(2, 2)
    lines = tty.getvalue().split("\n")
    assert [ln.rsplit("\r", 1)[-1].split(" (")[0] for ln in lines[:2]] == [
        f"[{'#' * progress.WIDTH}] 2/2 a: probe", f"[{'#' * progress.WIDTH}] 2/2 b: probe"]


def test_a_count_of_one_is_singular(cli, table, tmp_path):
    """"wrote 1 findings", "1 launches of kernels from outside": every count goes through words.plural."""
    baseline = tmp_path / "baseline.json"
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--baseline", baseline,
            "--update-baseline")
    assert r.exit_code == 0 and f"wrote 1 finding to {baseline}" in r.output, r.output
    lost = tmp_path / "lost.py"
    lost.write_text("from nowhere.gemm import matmul_kernel\n\n\ndef go(a, b):\n"
                    "    matmul_kernel[(1, 1)](a, b, BLOCK_M=128, num_warps=8, num_stages=4)\n")
    r = cli("check", lost, "--isolated", "-t", "rtx4090", "--statistics")
    assert "1 launch of kernels from outside the scanned tree" in r.output, r.output
    from tilefit.words import plural

    assert [plural(n, "entry", "entries") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
