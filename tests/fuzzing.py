"""Fuzzing and fault injection of real corpus files (issue 12): the harness shared by
``tests/test_fuzz.py`` (bounded, derandomised, in CI) and ``bench/fuzz.py`` (long runs).

One *case* is a folder holding a mutated copy of a real tuning table (the *bad* file) and an
unmodified table beside it (the *good* file). :func:`run_case` runs ``tilefit check`` in every
output format and ``tilefit check --fix`` on the folder, in process through Click, and returns
the violations of the properties the issue names:

* no traceback, no internal error, exit code 0 or 1 (2 is for usage errors; none are made);
* a bad file ``json.load`` refuses (or that is not a file) has a diagnostic;
* a mutation that keeps the JSON value (line endings, whitespace) keeps the file's findings;
* the good file keeps the findings it has when checked alone;
* after ``--fix`` every file still parses if it parsed before, a file that could not be parsed
  is byte for byte unchanged, a second ``--fix`` changes nothing, and what was fixed re-checks
  without a fixable diagnostic.

Mutations are plain data (:class:`Mutation`) so hypothesis can shrink them and a failure
prints a case that can be replayed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

ARGS = ("--isolated", "--estimator", "analytic", "--no-cache", "-t", "rtx4090")
FORMATS = ("concise", "full", "json", "sarif", "github", "gitlab", "html")
FIXABLE = ("SMEM001", "THR001")

# Real tables of every family the linter reads, picked for variety: fused MoE fp8 of an H100
# (offends an RTX 4090), block-FP8 GEMM, int8_w8a16 (two kernel variants), an AMD table with
# launch options, a schema-checked (mamba) table, a Helion table, and a down table.
SAMPLES = (
    "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=128,N=352,device_name=NVIDIA_H100_80GB_HBM3,"
    "dtype=fp8_w8a8.json",
    "vllm-0.33.0/vllm/model_executor/layers/quantization/utils/configs/N=7168,K=2304,device_name=AMD_Instinct_"
    "MI300X,dtype=fp8_w8a8,block_shape=[128,128].json",
    "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=1,N=14336,device_name=NVIDIA_A100-SXM4-80GB,"
    "dtype=int8_w8a16.json",
    "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=128,N=1024,device_name=AMD_Instinct_MI300X,"
    "dtype=fp8_w8a8.json",
    "vllm-0.33.0/vllm/model_executor/layers/mamba/ops/configs/selective_state_update/headdim=64,dstate=128,"
    "device_name=NVIDIA_H100_80GB_HBM3,cache_dtype=float16.json",
    "vllm-0.33.0/vllm/kernels/helion/configs/silu_mul_fp8/nvidia_h100.json",
)
GOOD = ("vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=64,N=640,device_name=NVIDIA_GeForce_RTX_4090,"
        "dtype=fp8_w8a8.json")

KINDS = ("flip", "truncate", "number", "nest", "bom", "nul", "key", "line_endings", "whitespace", "control",
         "file_kind")
NUMBERS = ("1" * 4301, "9" * 400, str(2 ** 1100), "-1", "0", "1e999", "-1e999", "NaN", "Infinity", "-Infinity",
           "1.5", "64.0", "true", "null", '"64"', "[]", "{}", str(2 ** 63), "-0")
KEYS = ("1e3", "-1", "0x10", "abc", "", " 7", "\u0663", "1\u00a0", "\\u0000", "\\ud800", "\\\\", "a\\tb",
        "\\u001b[31m", "\u202e", "NaN", "triton_version")
FILE_KINDS = ("fifo", "folder", "dev_zero", "empty", "too_large", "dangling")


@dataclass(frozen=True)
class Mutation:
    """One change to a file: ``kind`` (one of :data:`KINDS`), where (``at``, a fraction of the
    file), how much (``size``) and a choice among the kind's variants (``choice``)."""

    kind: str
    at: float = 0.5
    size: int = 1
    choice: int = 0

    def keeps_value(self) -> bool:
        """Whether the mutated text holds the same JSON value (its findings must not change)."""
        return self.kind in ("line_endings", "whitespace")


def corpus_root(tmp: Path) -> Path:
    """The corpus by bench/corpus_root.py's rule (the one place it is written; conftest's fixture
    and the benchmarks read it too); the packed archive is extracted under ``tmp``."""
    import importlib.util

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("_tilefit_bench_corpus_root", repo / "bench" / "corpus_root.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.corpus_root(tmp)


def _tokens(text: bytes, pattern: bytes) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, text)]


def _pick(spans, at: float):
    return spans[min(int(at * len(spans)), len(spans) - 1)] if spans else None


def mutate(data: bytes, m: Mutation) -> bytes:
    """The bytes of ``data`` after mutation ``m`` (``file_kind`` leaves the bytes alone)."""
    n = len(data)
    pos = min(int(m.at * n), max(n - 1, 0))
    if m.kind == "flip":
        if not n:
            return b"\xff"
        out = bytearray(data)
        for i in range(max(1, m.size % 8)):
            j = (pos + i * 7919) % n
            out[j] ^= 1 << ((m.choice + i) % 8)
        return bytes(out)
    if m.kind == "truncate":
        return data[:pos]
    if m.kind == "number":
        span = _pick(_tokens(data, rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), m.at)
        if span is None:
            return data
        return data[:span[0]] + NUMBERS[m.choice % len(NUMBERS)].encode() + data[span[1]:]
    if m.kind == "nest":
        span = _pick(_tokens(data, rb'(?<=: )-?\d+|(?<=:)-?\d+'), m.at) or (pos, pos)
        depth = (1, 10, 63, 64, 65, 200, 980, 5000, 100000)[m.choice % 9]
        opener, closer = (b'{"x": ', b"}") if m.size % 2 else (b"[", b"]")
        return data[:span[0]] + opener * depth + data[span[0]:span[1]] + closer * depth + data[span[1]:]
    if m.kind == "bom":
        return (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")[m.choice % 3] + data
    if m.kind == "nul":
        return data[:pos] + b"\x00" * max(1, m.size % 4) + data[pos:]
    if m.kind == "key":
        spans = _tokens(data, rb'"[^"\\\n]*"(?=\s*:)')
        span = _pick(spans, m.at)
        if span is None:
            return data
        if m.choice % (len(KEYS) + 1) == len(KEYS) and len(spans) > 1:  # a duplicate of another key
            other = spans[(spans.index(span) + 1) % len(spans)]
            new = data[other[0]:other[1]]
        else:
            new = ('"' + KEYS[m.choice % len(KEYS)] + '"').encode("utf-8")
        return data[:span[0]] + new + data[span[1]:]
    if m.kind == "line_endings":
        return data.replace(b"\r\n", b"\n").replace(b"\n", (b"\r\n", b"\r\n", b"\n\n")[m.choice % 3])
    if m.kind == "whitespace":
        ws = (b"\t", b" \t ", b"\n", b"\r\n   ", b"    ")[m.choice % 5]
        return re.sub(rb'"\s*:', lambda k: k.group()[:1] + ws + b":", data)
    if m.kind == "control":
        span = _pick(_tokens(data, rb'"[^"\\\n]*"'), m.at)
        if span is None:
            return data
        junk = (b"\x1b[2J", b"\t", b"\x7f", b"\xc2\x85", b"\xed\xa0\x80", b"\\ud800", b"\xe2\x80\xae")[m.choice % 7]
        return data[:span[0] + 1] + junk + data[span[0] + 1:]
    if m.kind == "file_kind":
        return data
    raise ValueError(m.kind)


def place(folder: Path, name: str, data: bytes, m: Mutation) -> bool:
    """Put the mutated file in ``folder``; returns whether ``json.load`` can read what was put
    there (a FIFO, a folder, a device, an empty file: no)."""
    path = folder / name
    if m.kind == "file_kind":
        kind = FILE_KINDS[m.choice % len(FILE_KINDS)]
        if kind == "fifo" and hasattr(os, "mkfifo"):
            os.mkfifo(path)
        elif kind == "folder" or kind == "fifo":
            path.mkdir()
        elif kind == "dev_zero" and os.path.exists("/dev/zero"):
            path.symlink_to("/dev/zero")
        elif kind == "too_large":
            path.write_bytes(data + b" " * (4 << 20))  # the case's pyproject caps files at 4 MiB
        elif kind == "dangling":
            path.symlink_to(folder / "nowhere.json")
        else:
            path.write_bytes(b"")
        return False
    path.write_bytes(mutate(data, m))
    return loads(path.read_bytes()) is not None


def loads(data: bytes):
    """What ``json.load`` makes of ``data`` (the engines' reader), or None when it raises."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def invoke(args, cwd: Path):
    from click.testing import CliRunner

    from tilefit.cli import cli

    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    finally:
        os.chdir(old)


def findings(output: str, name: str) -> set[tuple[str, str]]:
    """(code, message) of the concise lines of file ``name``."""
    out = set()
    for line in output.splitlines():
        m = re.match(r"^(.*?):\d+:\d+: ([A-Z]+[0-9]{3}) (?:\[\*\] )?(.*)$", line)
        if m and os.path.basename(m.group(1)) == name:
            out.add((m.group(2), m.group(3)))
    return out


def _problems_of(result, what: str) -> list[str]:
    out = []
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-1500:]
        out.append(f"{what}: {type(exc).__name__}: {exc}\n{tb}")
    if "Traceback (most recent call last)" in result.output:
        out.append(f"{what}: a traceback in the output")
    if "internal error" in result.output:
        out.append(f"{what}: {result.output[result.output.find('internal error'):][:300]}")
    if result.exit_code not in (0, 1):
        out.append(f"{what}: exit code {result.exit_code}: {result.output[-400:]}")
    return out


@dataclass
class Outcome:
    problems: list[str]
    bad_codes: set  # the codes of the bad file's diagnostics
    fixed_files: int = 0  # files --fix changed
    readable: bool = True  # json.load reads the bad file


def run_case(corpus: Path, sample: str, m: Mutation, baseline: dict, work: Path) -> Outcome:
    """Run one case in a fresh folder under ``work``; ``baseline`` memoises the findings of
    unmutated files checked alone."""
    folder = work / "case"
    if folder.exists():
        _remove(folder)
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[tool.tilefit]\nmax-file-size = 4194304\n")
    src = corpus / sample
    name = os.path.basename(sample)
    good_name = os.path.basename(GOOD)
    data = src.read_bytes()
    home = folder / _home(sample)  # some families are known by their folders (helion/configs/...)
    home.mkdir(parents=True, exist_ok=True)
    readable = place(home, name, data, m)
    shutil.copyfile(corpus / GOOD, folder / good_name)
    problems: list[str] = []
    args = ("check", ".", "--config", "pyproject.toml", *ARGS[1:])
    concise = invoke(args, folder)
    problems += _problems_of(concise, "check")
    bad = findings(concise.output, name)
    good = findings(concise.output, good_name)
    if good != _alone(baseline, corpus, GOOD, work):
        problems.append(f"the good file's findings changed: {sorted(good ^ _alone(baseline, corpus, GOOD, work))}")
    if not readable and not bad:
        problems.append("a file json.load refuses has no diagnostic")
    if m.keeps_value() and readable:
        want = {c for c, _ in _alone(baseline, corpus, sample, work)}
        if {c for c, _ in bad} != want:
            problems.append(f"a mutation that keeps the value changed the findings: {sorted({c for c, _ in bad})} "
                            f"vs {sorted(want)}")
    for fmt in FORMATS[1:]:
        r = invoke(args + ("--output-format", fmt), folder)
        problems += _problems_of(r, f"check --output-format {fmt}")
        if fmt in ("json", "sarif", "gitlab") and r.exit_code in (0, 1):
            try:
                json.loads(r.stdout)
            except ValueError as exc:
                problems.append(f"{fmt} output is not JSON: {exc}")
    before = _snapshot(folder)
    fixed = invoke(args + ("--fix",), folder)
    problems += _problems_of(fixed, "check --fix")
    after = _snapshot(folder)
    changed = [p for p in after if before.get(p) != after[p]]
    for p in changed:
        if loads(before[p]) is None:
            problems.append(f"--fix changed {p}, which did not parse")
        elif loads(after[p]) is None:
            problems.append(f"--fix wrote {p}, which does not parse")
    again = invoke(args + ("--fix",), folder)
    problems += _problems_of(again, "second check --fix")
    if _snapshot(folder) != after:
        problems.append("a second --fix changed files again")
    recheck = invoke(args + ("--output-format", "json"), folder)
    problems += _problems_of(recheck, "re-check")
    if recheck.exit_code in (0, 1):
        for d in json.loads(recheck.stdout):
            if os.path.basename(d["filename"]) in changed and d["code"] in FIXABLE and d.get("fix"):
                problems.append(f"{d['filename']} still has a fixable {d['code']} after --fix")
    leftovers = [p for _d, _s, files in os.walk(folder) for p in files if ".tilefit-" in p]
    if leftovers:
        problems.append(f"temporary files left: {leftovers}")
    return Outcome(problems, {c for c, _ in bad}, len(changed), readable)


def _alone(baseline: dict, corpus: Path, sample: str, work: Path) -> set:
    hit = baseline.get(sample)
    if hit is None:
        folder = work / "alone"
        if folder.exists():
            _remove(folder)
        folder.mkdir(parents=True)
        name = os.path.basename(sample)
        (folder / _home(sample)).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / sample, folder / _home(sample) / name)
        r = invoke(("check", ".", *ARGS), folder)
        hit = baseline[sample] = findings(r.output, name)
    return hit


def _home(sample: str) -> str:
    """The folders of ``sample`` below its engine's package (``vllm/kernels/helion/configs/x``)."""
    parts = Path(sample).parts
    return str(Path(*parts[1:-1])) if len(parts) > 2 else "."


def _snapshot(folder: Path) -> dict:
    """basename -> bytes of every regular file below ``folder`` (symlinks and the rest left out)."""
    out = {}
    for dirpath, _dirs, files in os.walk(folder):
        for p in sorted(files):
            full = Path(dirpath) / p
            if not full.is_symlink() and stat.S_ISREG(os.lstat(full).st_mode):
                out[p] = full.read_bytes()
    return out


def _remove(folder: Path) -> None:
    for p in folder.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    folder.rmdir()


if __name__ == "__main__":  # replay: python tests/fuzzing.py KIND AT SIZE CHOICE SAMPLE_INDEX
    kind, at, size, choice, idx = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    import tempfile

    work = Path(tempfile.mkdtemp())
    out = run_case(corpus_root(work), SAMPLES[idx], Mutation(kind, at, size, choice), {}, work)
    print("\n".join(out.problems) or "ok")
