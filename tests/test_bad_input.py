"""Issue 12: bad input and odd files give a diagnostic or a one-line error, never a traceback,
a hang or a blow-up; each test reproduces one item of the fuzzing / fault-injection pass."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest

H100 = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
H100_B = "E=64,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
MI300X = "E=128,N=1024,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8.json"
OVER = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
        "num_stages": 4}  # 147456 B on sm_89: over an RTX 4090's 101376
FITS = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
        "num_stages": 2}
ANALYTIC = ("--isolated", "--estimator", "analytic", "--no-cache")


def write(folder, name, value) -> str:
    path = folder / name
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=4))
    return str(path)


def codes(output: str, path: str | None = None) -> list[str]:
    """The rule codes of the concise lines of ``output`` (of ``path`` only, if given)."""
    out = []
    for line in output.splitlines():
        m = re.match(r"^(.*):\d+:\d+: ([A-Z]+[0-9]{3}) ", line)
        if m and (path is None or m.group(1) == path):
            out.append(m.group(2))
    return out


# -- tracebacks ----------------------------------------------------------------------------------


def test_a_4301_digit_integer_is_sch001_and_the_other_files_are_still_reported(cli, tmp_path):
    bad = write(tmp_path, H100, '{"1": {"BLOCK_SIZE_M": ' + "1" * 4301 + "}}")
    good = write(tmp_path, H100_B, {"4096": OVER})
    r = cli("check", tmp_path, "--target", "rtx4090", *ANALYTIC)
    assert r.exit_code == 1, r.output
    assert codes(r.output, bad) == ["SCH001"] and "4301 digits" in r.output
    assert codes(r.output, good) == ["SMEM001"]


def test_a_huge_power_of_two_block_is_val003_and_the_other_entries_are_fixed(cli, tmp_path):
    path = write(tmp_path, H100, {"1": dict(FITS, BLOCK_SIZE_M=2 ** 1100), "4096": OVER})
    r = cli("check", path, "--target", "rtx4090", "--fix", *ANALYTIC)
    assert "internal error" not in r.output and r.exit_code == 1, r.output
    assert "BLOCK_SIZE_M=2**1100 is above the maximum 1048576" in r.output
    fixed = json.loads(open(path).read())
    assert fixed["1"]["BLOCK_SIZE_M"] == 2 ** 1100 and fixed["4096"] != OVER


@pytest.mark.parametrize("key", ["1e3", "-1", "0x10", "abc", "", " 7"])
def test_an_odd_batch_key_on_an_offending_entry_gets_an_unranked_fix(cli, tmp_path, key):
    path = write(tmp_path, H100, {key: OVER, "4096": OVER})
    r = cli("check", path, "--target", "rtx4090", "--fix", *ANALYTIC)
    assert "internal error" not in r.output, r.output
    fixed = json.loads(open(path).read())
    assert fixed[key] != OVER and fixed["4096"] != OVER
    again = cli("check", path, "--target", "rtx4090", "--select", "SMEM", *ANALYTIC)
    assert again.exit_code == 0, again.output


def test_980_nested_objects_in_a_schema_checked_table_are_sch001(cli, tmp_path):
    text = '{"8": {"BLOCK_SIZE_M": ' + '{"x": ' * 980 + "1" + "}" * 980 + ', "num_warps": 1}}'
    path = write(tmp_path, "headdim=64,dstate=128,device_name=NVIDIA_H100_80GB_HBM3,cache_dtype=float16.json", text)
    loads = subprocess.run([sys.executable, "-c", "import json, sys; print(json.load(open(sys.argv[1]))['8']"
                            "['num_warps'])", path], capture_output=True, text=True)
    assert loads.stdout.strip() == "1"  # what the engine's json.load accepts
    r = cli("check", path, *ANALYTIC)
    assert r.exit_code == 1 and codes(r.output) == ["SCH001"], r.output
    assert "nesting deeper than 64 levels" in r.output


@pytest.mark.parametrize("content, words", [
    ("[" * 100000 + "]" * 100000, "nesting too deep"),
    ('{"findings": [' + '{"x":' * 5000 + "1" + "}" * 5000 + "]}", "nesting too deep"),
    (json.dumps({"findings": [{"code": "SMEM001", "path": "x", "fingerprint": ["a"]}]}), "string code"),
    (json.dumps({"findings": [{"code": "SMEM001", "path": "x", "fingerprint": "f", "pointer": 3}]}), "pointer"),
    (json.dumps({"findings": [7]}), "findings[0]"),
])
def test_a_bad_baseline_is_a_one_line_error(cli, tmp_path, content, words):
    path = write(tmp_path, H100, {"4096": OVER})
    baseline = tmp_path / "baseline.json"
    baseline.write_text(content)
    r = cli("check", path, "--baseline", baseline, *ANALYTIC)
    assert r.exit_code == 2 and words in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("toml, words", [
    ("tool = 1\n", "`tool` must be a table"),
    ("tool = ['tilefit']\n", "`tool` must be a table"),
    ("[tool]\ntilefit = 3\n", "`tool.tilefit` must be a table"),
    ("[tool]\ntilefit = 'x'\n", "`tool.tilefit` must be a table"),
])
def test_pyproject_with_tool_or_tilefit_not_a_table_is_a_config_error(cli, tmp_path, monkeypatch, toml, words):
    write(tmp_path, H100, {"1": FITS})
    (tmp_path / "pyproject.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    r = cli("check", ".", "--estimator", "analytic")
    assert r.exit_code == 2 and words in r.output, r.output
    r = cli("check", ".", "--config", "pyproject.toml", "--estimator", "analytic")
    assert r.exit_code == 2 and words in r.output, r.output


def test_a_pyproject_with_one_non_utf8_byte_is_an_error_not_skipped(cli, tmp_path, monkeypatch):
    write(tmp_path, H100, {"4096": OVER})
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.tilefit]\ntargets = ["rtx4090"]\n# caf\xe9\n')
    monkeypatch.chdir(tmp_path)
    r = cli("check", ".", "--estimator", "analytic")
    assert r.exit_code == 2 and "not UTF-8 (byte 0xe9" in r.output, r.output


@pytest.mark.parametrize("sep", ["\t:", "\n:", " \t :", "\r\n:"])
def test_a_duplicate_key_with_whitespace_before_the_colon_is_key002(cli, tmp_path, sep):
    text = ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
            f'"num_warps"{sep} 4, "num_warps": 8}}}}')
    path = write(tmp_path, H100, text)
    r = cli("check", path, "--select", "KEY002", *ANALYTIC)
    assert r.exit_code == 1 and codes(r.output) == ["KEY002"], r.output


# -- hangs and memory ----------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_a_config_is_io001_without_blocking(cli, tmp_path):
    good = write(tmp_path, H100_B, {"4096": OVER})
    fifo = tmp_path / H100
    os.mkfifo(fifo)
    done = {}

    def run():
        done["r"] = cli("check", tmp_path, "--target", "rtx4090", *ANALYTIC)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # unblock the reader so the test process can end
        with open(fifo, "wb"):
            pass
        pytest.fail("tilefit check blocked on a FIFO")
    r = done["r"]
    assert codes(r.output, str(fifo)) == ["IO001"] and "FIFO" in r.output, r.output
    assert codes(r.output, good) == ["SMEM001"]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_symlink_to_dev_zero_is_io001_not_an_endless_read(cli, tmp_path):
    link = tmp_path / H100
    link.symlink_to("/dev/zero")
    r = cli("check", tmp_path, *ANALYTIC)
    assert r.exit_code == 1 and codes(r.output) == ["IO001"] and "character device" in r.output, r.output


def test_a_file_over_the_size_cap_is_io001_and_the_cap_is_configurable(cli, tmp_path, monkeypatch):
    path = write(tmp_path, H100, {"1": FITS})
    size = os.path.getsize(path)
    (tmp_path / "pyproject.toml").write_text(f"[tool.tilefit]\nmax-file-size = {size - 1}\n")
    monkeypatch.chdir(tmp_path)
    r = cli("check", ".", "--estimator", "analytic", "--no-cache")
    assert r.exit_code == 1 and codes(r.output) == ["IO001"] and "over the" in r.output, r.output
    (tmp_path / "pyproject.toml").write_text(f"[tool.tilefit]\nmax-file-size = {size}\n")
    r = cli("check", ".", "--estimator", "analytic", "--no-cache")
    assert r.exit_code == 0, r.output
    (tmp_path / "pyproject.toml").write_text("[tool.tilefit]\nmax-file-size = 0\n")
    assert cli("check", ".", "--estimator", "analytic").exit_code == 2


def test_the_reader_refuses_what_is_not_a_regular_file(tmp_path):
    from tilefit.readfile import FileTooLarge, NotRegularFile, read_bytes

    (tmp_path / "f").write_bytes(b"x" * 10)
    assert read_bytes(tmp_path / "f", limit=10) == b"x" * 10
    with pytest.raises(FileTooLarge):
        read_bytes(tmp_path / "f", limit=9)
    with pytest.raises(NotRegularFile, match="directory"):
        read_bytes(tmp_path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(NotRegularFile, match="character device"):
            read_bytes("/dev/zero")


def test_absurd_num_stages_is_rejected_before_any_compile(tmp_path, monkeypatch):
    """An MI300X entry with num_stages=16 made `auto` compile for over 500 s; the value rules
    reject it first and nothing estimates it."""
    from tilefit.api import CheckOptions, run_check
    from tilefit.estimate import Estimator

    asked = []
    real = Estimator.estimate

    def spy(self, spec, arch, limit=None):
        asked.append(spec.num_stages)
        return real(self, spec, arch, limit)

    monkeypatch.setattr(Estimator, "estimate", spy)
    entry = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1, "num_warps": 2,
             "num_stages": 16, "waves_per_eu": 0}
    path = write(tmp_path, MI300X, {"1": entry, "2": dict(entry, num_stages=2)})
    result = run_check([path], CheckOptions(estimator="auto", use_cache=False))
    assert [(d.code, d.pointer, d.severity.value) for d in result.diagnostics] == [
        ("VAL003", "/1/num_stages", "warning")]
    assert 16 not in asked and 2 in asked


# -- fixes that touch what they should not ---------------------------------------------------------


def test_fix_does_not_read_json_files_of_the_current_folder_as_coefficients(cli, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    path = write(work, H100, {"4096": OVER})
    here = tmp_path / "here"
    here.mkdir()
    (here / "notes.json").write_text("{not json")
    (here / "deep.json").write_text("[" * 100000 + "]" * 100000)
    monkeypatch.chdir(here)
    monkeypatch.delenv("TILEFIT_PERF_MODEL_PATH", raising=False)
    r = cli("check", path, "--target", "rtx4090", "--fix", *ANALYTIC)
    assert r.exit_code == 0 and "internal error" not in r.output, r.output
    assert json.loads(open(path).read())["4096"] != OVER


# -- the rest ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, shown", [(True, "found true"), (None, "found null"), ("64", 'found "64"'),
                                          (64.0, "found 64.0")])
def test_val002_spells_the_value_as_json_does(cli, tmp_path, value, shown):
    path = write(tmp_path, H100, {"1": dict(FITS, num_stages=value)})
    r = cli("check", path, "--select", "VAL002", *ANALYTIC)
    assert r.exit_code == 1 and f"num_stages must be an integer, {shown}" in r.output, r.output


@pytest.mark.parametrize("fmt", ["concise", "full", "github"])
def test_paths_and_file_text_are_printed_escaped(cli, tmp_path, fmt):
    folder = tmp_path / "a\tb\x1b[31m"
    folder.mkdir()
    path = write(folder, H100, '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, '
                               '"GROUP_SIZE_M": 1, "num_warps": "\\u001b[2J"}}')
    r = cli("check", path, "--output-format", fmt, *ANALYTIC)
    assert r.exit_code == 1, r.output
    assert "\x1b" not in r.output and "\t" not in r.output
    assert "a\\tb\\x1b[31m" in r.output and "VAL002" in r.output


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file systems refuse non-UTF-8 names")
def test_an_undecodable_file_name_is_printed_with_its_byte_escaped(tmp_path, cli):
    """The real console streams once (``concise``, the escaped bytes asserted); the other formats
    in-process: Click's test runner writes stdout as strict UTF-8, as ``PYTHONIOENCODING=utf-8``
    does, so a name that cannot be encoded raises there as well (a process per format was 7 starts
    of the package for one question)."""
    name = os.fsencode(str(tmp_path)) + b"/E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3\xff.json"
    with open(name, "w") as fh:
        fh.write('{"1": {"BLOCK_SIZE_M": true}}')
    r = subprocess.run([sys.executable, "-m", "tilefit", "check", str(tmp_path), "--output-format", "concise",
                        *ANALYTIC], capture_output=True, env=dict(os.environ, PYTHONIOENCODING="utf-8"))
    assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
    assert b"HBM3\\xff.json:1:" in r.stdout
    for fmt in ("full", "json", "sarif", "github", "gitlab", "html"):
        r = cli("check", tmp_path, "--output-format", fmt, *ANALYTIC)
        assert r.exit_code == 1, (fmt, r.output)


def test_a_folder_named_like_a_config_in_a_walked_tree_is_io001(cli, tmp_path):
    (tmp_path / H100).mkdir()
    good = write(tmp_path, H100_B, {"4096": OVER})
    r = cli("check", tmp_path, "--target", "rtx4090", *ANALYTIC)
    assert r.exit_code == 1 and codes(r.output, str(tmp_path / H100)) == ["IO001"], r.output
    assert "directory" in r.output and codes(r.output, good) == ["SMEM001"]


def test_a_batch_key_of_4301_digits_is_key001_not_a_traceback(cli, tmp_path):
    path = write(tmp_path, H100, '{"' + "1" * 4301 + '": ' + json.dumps(FITS) + ', "4096": ' + json.dumps(OVER) + "}")
    r = cli("check", path, "--target", "rtx4090", "--fix", *ANALYTIC)
    assert "internal error" not in r.output and r.exit_code == 1, r.output
    assert codes(r.output) == ["KEY001"] and "int() raises ValueError" in r.output


def test_a_huge_group_size_elsewhere_in_the_table_is_no_candidate(cli, tmp_path):
    """The fixer tries the table's own GROUP_SIZE_M values: a 400-digit one crashed the model."""
    path = write(tmp_path, H100, {"1": dict(FITS, GROUP_SIZE_M=int("9" * 400)), "4096": OVER})
    r = cli("check", path, "--target", "rtx4090", "--fix", *ANALYTIC)
    assert "internal error" not in r.output and r.exit_code == 1, r.output
    fixed = json.loads(open(path).read())
    assert fixed["4096"] != OVER and fixed["4096"]["GROUP_SIZE_M"] < 2 ** 31


@pytest.mark.parametrize("fmt", ["json", "sarif", "gitlab", "html"])
def test_nan_infinity_and_a_lone_surrogate_key_give_strict_json_in_every_format(cli, tmp_path, fmt):
    """json.load reads NaN, Infinity and a "\\ud800" key; the html page's embedded data raised
    ValueError (allow_nan=False) and UnicodeEncodeError on them."""
    write(tmp_path, H100, '{"1": {"BLOCK_SIZE_M": NaN, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                          '"num_warps": 4, "num_stages": 2}, "\\ud800": {"BLOCK_SIZE_M": 1e999, "BLOCK_SIZE_N": '
                          '-Infinity, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}}')
    out = tmp_path / "report.out"
    r = cli("check", tmp_path, "--output-format", fmt, "-o", out, *ANALYTIC)
    assert r.exit_code == 1, r.output
    text = out.read_bytes().decode("utf-8")
    if fmt == "html":
        text = re.search(r'id="report-data">(.*?)</script>', text, re.S).group(1)

    def no_constant(name):
        raise AssertionError(f"{name} is not JSON")

    data = json.loads(text, parse_constant=no_constant)
    if fmt == "html":
        assert {"NaN", "Infinity", "-Infinity"} <= {v for c in data["configs"] for v in c.values()}
        assert [k for k, _ in data["tables"][0]["en"]] == ["1", "\ud800"]


def test_a_table_of_thousands_of_entries_is_planned_per_batch_size_bucket(tmp_path, monkeypatch):
    """A 50 MB table (270000 entries) searched once per batch key never finished its json
    output; past LARGE_TABLE_ENTRIES entries one search serves a bucket of batch sizes, and
    every entry is still fixed to a config that fits."""
    from tilefit.app import run_fix
    from tilefit.api import CheckOptions
    from tilefit.fix import planner as planner_mod

    n = planner_mod.LARGE_TABLE_ENTRIES + 88
    path = write(tmp_path, H100, {str(m): OVER for m in range(1, n + 1)})
    searched = []
    real = planner_mod.FixPlanner._search

    def counting(self, table, ctx, key, entry, space):
        searched.append(key)
        return real(self, table, ctx, key, entry, space)

    monkeypatch.setattr(planner_mod.FixPlanner, "_search", counting)
    result = run_fix([path], CheckOptions(targets=["rtx4090"], estimator="analytic", use_cache=False))
    buckets = {planner_mod.bucket_key(str(m)) for m in range(1, n + 1)}
    assert len(searched) == len(buckets) < 40, len(searched)
    assert not result.errors and result.fixed["SMEM001"] == n
    assert not [d for d in result.check.diagnostics if d.code == "SMEM001"]
    assert planner_mod.bucket_key("96") == "96" and planner_mod.bucket_key("100") == "96"
    assert planner_mod.bucket_key("abc") == "abc"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_or_dev_zero_as_device_file_is_a_one_line_error(cli, tmp_path):
    """The device database reads its user files with its own copy of the regular-file guard
    (it imports nothing of the rest of tilefit)."""
    table = write(tmp_path, H100, {"1": FITS})
    fifo = tmp_path / "gpus.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for device_file in (fifo, zero):
        r = cli("check", table, "--device-file", device_file, *ANALYTIC)
        assert r.exit_code == 2 and "cannot read device file: not a regular file" in r.output, r.output
