"""The fixer on small files: formatting kept byte for byte, key insertion, duplicate keys,
verification and revert, --diff, idempotence, safety classes, outputs."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tilefit.api import CheckOptions
from tilefit.app import compare_fixes, run_check, run_fix
from tilefit.fix.edits import EditError, apply_edits, entry_edits, same_json
from tilefit.jsonpos import JsonDocument
from tilefit.model import Applicability

FP8_H200 = "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
BF16_H200 = "E=8,N=14336,device_name=NVIDIA_H200.json"
# SGLang's old fp8 default: 147456 bytes on sm_89 with 4 stages
OFFENDING = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
             "num_stages": 4}
FITTING = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4,
           "num_stages": 3}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def opts(**kw) -> CheckOptions:
    kw.setdefault("targets", ["rtx4090"])
    kw.setdefault("estimator", "analytic")
    return CheckOptions(**kw)


def dump(table: dict, indent, newline: str = "\n", final_newline: bool = True) -> bytes:
    text = json.dumps(table, indent=indent)
    if newline != "\n":
        text = text.replace("\n", newline)
    if final_newline:
        text += newline
    return text.encode()


def write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def changed_lines(old: bytes, new: bytes) -> list[tuple[bytes, bytes]]:
    a, b = old.split(b"\n"), new.split(b"\n")
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b) if x != y]


def assert_only_values_changed(old: bytes, new: bytes, fixes) -> None:
    """Every byte outside the fixes' edits is unchanged, and the edits reproduce the file."""
    edits = sorted((e for f in fixes for e in f.edits), key=lambda e: e.start_offset)
    rebuilt, applied = apply_edits(old, edits)
    assert rebuilt == new and len(applied) == len(edits)
    pos_old = pos_new = 0
    for e in edits:
        keep = e.start_offset - pos_old
        assert old[pos_old:e.start_offset] == new[pos_new:pos_new + keep]
        pos_new += keep + len(e.content.encode())
        pos_old = e.end_offset
    assert old[pos_old:] == new[pos_new:]


# -- formatting ------------------------------------------------------------------------------------

@pytest.mark.parametrize("indent", [1, 2, 4, None])
def test_indentation_kept(tmp_path, indent):
    data = dump({"1": FITTING, "256": OFFENDING, "4096": dict(OFFENDING)}, indent)
    path = write(tmp_path, FP8_H200, data)
    result = run_fix([str(path)], opts())
    assert result.exit_code == 0, result.errors
    new = path.read_bytes()
    assert new != data
    assert_only_values_changed(data, new, result.files[0].fixes)
    if indent is not None:
        for old_line, new_line in changed_lines(data, new):
            # same indentation, same key, only the number differs
            assert old_line.split(b":")[0] == new_line.split(b":")[0]
    assert json.loads(new)["1"] == FITTING


def test_crlf_and_missing_final_newline_kept(tmp_path):
    data = dump({"1": FITTING, "256": OFFENDING}, 4, newline="\r\n", final_newline=False)
    path = write(tmp_path, FP8_H200, data)
    result = run_fix([str(path)], opts())
    assert result.exit_code == 0
    new = path.read_bytes()
    assert new != data
    assert b"\n" not in new.replace(b"\r\n", b"")  # no bare LF
    assert not new.endswith(b"\n") and new.endswith(b"}")
    assert new.count(b"\r\n") == data.count(b"\r\n")
    assert_only_values_changed(data, new, result.files[0].fixes)


def test_key_order_kept_and_unsorted_batch_keys(tmp_path):
    table = {"4096": OFFENDING, "1": FITTING, "256": dict(OFFENDING)}
    data = dump(table, 2)
    path = write(tmp_path, FP8_H200, data)
    run_fix([str(path)], opts())
    new = json.loads(path.read_bytes())
    assert list(new) == ["4096", "1", "256"]
    for entry in new.values():
        assert list(entry)[:6] == list(OFFENDING)


def test_permissions_kept(tmp_path):
    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    os.chmod(path, 0o640)
    run_fix([str(path)], opts())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tilefit-")]


# -- key insertion ------------------------------------------------------------------------------

NO_STAGES = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 1024, "GROUP_SIZE_M": 1, "num_warps": 4}


@pytest.mark.parametrize("indent,newline", [(4, "\n"), (2, "\r\n"), (1, "\n"), (None, "\n")])
def test_missing_num_stages_is_inserted_in_the_entry_style(tmp_path, indent, newline):
    """bf16 16x16x1024 with Triton's default 3 stages needs 131072 bytes on sm_89; the only safe
    fix is num_stages=2, which the entry does not have: it is added after the last member."""
    data = dump({"1": NO_STAGES}, indent, newline=newline)
    path = write(tmp_path, BF16_H200, data)
    result = run_fix([str(path)], opts())
    assert result.exit_code == 0, (result.errors, [d.message for d in result.check.diagnostics])
    new = path.read_bytes()
    entry = json.loads(new)["1"]
    assert entry == result.files[0].plans[0].entry
    assert entry["num_stages"] == 2 and entry["BLOCK_SIZE_K"] == 1024  # safe: BK kept
    assert list(entry)[:5] == list(NO_STAGES) and list(entry)[-1] == "num_stages"
    assert_only_values_changed(data, new, result.files[0].fixes)
    if indent is not None:
        pad = (" " * 2 * indent).encode()
        assert (b"," + newline.encode() + pad + b'"num_stages": 2' + newline.encode()) in new
    else:
        assert b'"num_warps": 4, "num_stages": 2}' in new


@pytest.mark.parametrize("text,expected", [
    (b'{"1": {"BLOCK_SIZE_M": 64}}', b'{"1": {"BLOCK_SIZE_M": 64, "num_stages": 2}}'),
    (b'{"1": {"BLOCK_SIZE_M":64,"BLOCK_SIZE_N":32}}', b'{"1": {"BLOCK_SIZE_M":64,"BLOCK_SIZE_N":32,"num_stages":2}}'),
    (b'{\r\n "1": {\r\n  "BLOCK_SIZE_M": 64\r\n }\r\n}', b'{\r\n "1": {\r\n  "BLOCK_SIZE_M": 64,\r\n  "num_stages": 2\r\n }\r\n}'),
])
def test_insertion_edit_styles(text, expected):
    if b'"1": {"BLOCK_SIZE_M":64' in text:
        expected = b'{"1": {"BLOCK_SIZE_M":64,"BLOCK_SIZE_N":32,"num_stages":2}}'
    doc = JsonDocument.parse(text)
    orig = doc.value["1"]
    edits = entry_edits(doc, "1", orig, {**orig, "num_stages": 2})
    new, _ = apply_edits(text, edits)
    assert new == expected


def test_edits_never_remove_keys():
    doc = JsonDocument.parse(b'{"1": {"BLOCK_SIZE_M": 64, "num_stages": 4}}')
    with pytest.raises(EditError):
        entry_edits(doc, "1", doc.value["1"], {"BLOCK_SIZE_M": 64})


def test_same_json_is_type_strict():
    assert same_json({"a": 1}, {"a": 1})
    assert not same_json(1, True) and not same_json(1, 1.0) and not same_json([1], [1, 2])


# -- duplicate keys -------------------------------------------------------------------------------

def test_duplicate_parameter_key_edits_the_occurrence_json_load_keeps(tmp_path):
    text = ('{\n    "256": {\n        "BLOCK_SIZE_M": 128,\n        "BLOCK_SIZE_N": 256,\n        "BLOCK_SIZE_K": 128,\n'
            '        "GROUP_SIZE_M": 32,\n        "num_warps": 8,\n        "num_stages": 2,\n        "num_stages": 4\n'
            '    }\n}\n').encode()
    path = write(tmp_path, FP8_H200, text)
    result = run_fix([str(path)], opts())
    new = path.read_bytes()
    assert result.exit_code == 1  # KEY002 stays: the fixer does not remove keys
    assert {d.code for d in result.check.diagnostics} == {"KEY002"}
    assert b'"num_stages": 2,\n' in new  # the first occurrence is untouched
    assert json.loads(new)["256"] == result.files[0].plans[0].entry != {**OFFENDING, "num_stages": 4}
    assert_only_values_changed(text, new, result.files[0].fixes)


def test_duplicate_batch_key_with_a_dead_offender_is_not_touched(tmp_path):
    text = ('{"256": ' + json.dumps(OFFENDING) + ', "256": ' + json.dumps(FITTING) + '}\n').encode()
    path = write(tmp_path, FP8_H200, text)
    result = run_fix([str(path)], opts())
    assert path.read_bytes() == text
    assert not result.files and not result.errors
    # json.load keeps the fitting one: the dead offender is KEY002's (the duplicate), no SMEM001
    assert {d.code for d in result.check.diagnostics} == {"KEY002"}


# -- verification -------------------------------------------------------------------------------

def test_unverifiable_fix_leaves_the_file_untouched(tmp_path, monkeypatch, cli):
    import tilefit.fix.edits as edits

    data = dump({"1": FITTING, "256": OFFENDING}, 4)
    path = write(tmp_path, FP8_H200, data)
    monkeypatch.setattr(edits, "render_value", lambda v: f"{v},")  # a stray comma: invalid JSON
    result = run_fix([str(path)], opts())
    assert result.exit_code == 2
    assert path.read_bytes() == data
    assert any("invalid JSON" in e and "left unchanged" in e for e in result.errors)

    monkeypatch.setattr(edits, "render_value", lambda v: str(v + 1 if isinstance(v, int) else v))
    res = cli("check", "--fix", "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert res.exit_code == 2
    assert path.read_bytes() == data
    assert "not the planned" in res.output or "not the planned" in (res.stderr or "")


def test_file_changed_on_disk_is_not_overwritten(tmp_path, monkeypatch):
    import tilefit.fix.runner as runner

    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    real = runner.write_fixed

    def racing(p, old, new, *args):
        path.write_bytes(old + b" ")  # someone else edits the file meanwhile
        real(p, old, new, *args)

    monkeypatch.setattr(runner, "write_fixed", racing)
    result = run_fix([str(path)], opts())
    assert result.exit_code == 2 and path.read_bytes().endswith(b" ")


# -- modes, safety, idempotence -------------------------------------------------------------------

def test_diff_writes_nothing_and_exits_1(tmp_path, cli):
    data = dump({"256": OFFENDING}, 4)
    path = write(tmp_path, FP8_H200, data)
    res = cli("check", "--diff", "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert res.exit_code == 1
    assert path.read_bytes() == data
    assert '-        "num_stages": 4' in res.stdout or '-        "BLOCK_SIZE_M": 128' in res.stdout
    assert res.stdout.startswith(f"--- {path}\n+++ {path}\n@@ ")
    assert cli("check", "--fix", "--estimator", "analytic", "-t", "rtx4090", str(path)).exit_code == 0
    again = cli("check", "--diff", "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert again.exit_code == 0 and "---" not in again.stdout


def test_second_run_is_a_no_op(tmp_path):
    path = write(tmp_path, FP8_H200, dump({"1": FITTING, "256": OFFENDING, "1024": dict(OFFENDING)}, 2))
    first = run_fix([str(path)], opts(targets=["consumer"]))
    assert first.changed and first.exit_code in (0, 1)
    after = path.read_bytes()
    mtime = os.stat(path).st_mtime_ns
    second = run_fix([str(path)], opts(targets=["consumer"]))
    assert not second.files and not second.changed
    assert path.read_bytes() == after and os.stat(path).st_mtime_ns == mtime
    assert not [d for d in second.check.diagnostics if d.code == "SMEM001"]


UNSAFE_ONLY = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 2048, "GROUP_SIZE_M": 1, "num_warps": 4,
               "num_stages": 2}


def test_block_k_change_is_unsafe(tmp_path, cli):
    """16x16 blocks at 2 stages cannot shrink: only a smaller BLOCK_SIZE_K fits, an unsafe fix."""
    data = dump({"1": UNSAFE_ONLY}, 4)
    path = write(tmp_path, BF16_H200, data)
    res = cli("check", "--fix", "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert res.exit_code == 1 and path.read_bytes() == data
    assert "--unsafe-fixes" in res.output
    plain = cli("check", "--estimator", "analytic", "-t", "rtx4090", "--show-fixes", str(path))
    assert "SMEM001 [*]" not in plain.output and "hidden fix" in plain.output
    res = cli("check", "--fix", "--unsafe-fixes", "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert res.exit_code == 0, res.output
    new = json.loads(path.read_bytes())["1"]
    assert new["BLOCK_SIZE_K"] < 2048


def test_safe_fix_marked_and_hinted(tmp_path, cli):
    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    res = cli("check", "--estimator", "analytic", "-t", "rtx4090", "--show-fixes", str(path))
    assert res.exit_code == 1
    assert "SMEM001 [*] OutOfResources" in res.output
    plain = cli("check", "--estimator", "analytic", "-t", "rtx4090", str(path))  # the hook's output: no planning
    assert "SMEM001 OutOfResources" in plain.output and "tilefit check --fix" in plain.output
    assert "[*] 1 fixable with the `--fix` option." in res.output


def test_exit_non_zero_on_fix_and_show_fixes(tmp_path, cli):
    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    res = cli("fix", "--exit-non-zero-on-fix", "--show-fixes", "--estimator", "analytic", "-t", "rtx4090",
              str(path))
    assert res.exit_code == 1
    assert "1 fixed, 0 remaining" in res.output
    assert "SMEM001 (shared-memory-per-block)" in res.output + (res.stderr or "")


def test_json_output_carries_the_fix(tmp_path, cli):
    data = dump({"1": FITTING, "256": OFFENDING}, 4)
    path = write(tmp_path, FP8_H200, data)
    res = cli("check", "--output-format", "json", "--estimator", "analytic", "-t", "rtx4090", str(path))
    out = json.loads(res.output)
    smem = [d for d in out if d["code"] == "SMEM001"]
    assert smem and all(d["fix"] is not None for d in smem)
    fix = smem[0]["fix"]
    assert fix["applicability"] == "safe" and fix["message"].startswith("Set ")
    new = data
    for e in sorted(fix["edits"], key=lambda e: -e["start_offset"]):
        assert set(e) >= {"content", "location", "end_location", "start_offset", "end_offset"}
        assert e["location"]["row"] >= 1
        new = new[:e["start_offset"]] + e["content"].encode() + new[e["end_offset"]:]
    fixed = json.loads(new)
    assert fixed["1"] == FITTING and fixed["256"] != OFFENDING


def test_fix_report_markdown(tmp_path, cli):
    path = write(tmp_path, FP8_H200, dump({"1": FITTING, "256": OFFENDING}, 4))
    report = tmp_path / "report.md"
    res = cli("check", "--fix", "--fix-report", str(report), "--estimator", "analytic", "-t", "rtx4090", str(path))
    assert res.exit_code == 0
    text = report.read_text()
    assert text.startswith("## tilefit:")
    assert "| 256 | `128/256/128/G32/w8/s4` →" in text
    assert "sm_89: 147456 →" in text and "/ 101376" in text
    assert "rtx4090:" in text and "×" in text


def test_thread_limit_fix_on_amd(tmp_path):
    entry = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 32,
             "num_stages": 2}
    path = write(tmp_path, "E=8,N=14336,device_name=AMD_Instinct_MI300X.json", dump({"1": entry}, 4))
    before = run_check([str(path)], opts(targets=[]))
    assert "THR001" in {d.code for d in before.diagnostics}
    result = run_fix([str(path)], opts(targets=[]))
    new = json.loads(path.read_bytes())["1"]
    assert new["num_warps"] * 64 <= 1024
    assert "THR001" not in {d.code for d in result.check.diagnostics}


def test_margin_is_kept(tmp_path):
    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    result = run_fix([str(path)], opts(fix_margin=8192))
    plan = result.files[0].plans[0]
    for need in plan.needs:
        assert need.after + 8192 <= need.group.limit


def test_compare_fixes_gives_original_naive_and_chosen(tmp_path):
    path = write(tmp_path, FP8_H200, dump({"1": FITTING, "256": OFFENDING}, 4))
    rows = compare_fixes(str(path), ["rtx4090"])
    assert len(rows) == 1
    row = rows[0]
    assert row.key == "256" and row.M == 256
    assert row.original == OFFENDING
    assert row.naive == {**OFFENDING, "num_stages": 3}
    assert row.chosen != OFFENDING and row.applicability == "safe"
    assert row.shape["experts"] == 8 and row.shape["top_k"] == 2
    assert set(row.predicted_us) >= {"h200", "rtx4090"}
    assert set(row.predicted_us["h200"]) == {"original", "naive", "chosen", "engine_default"}
    # vLLM 0.33's get_default_config at M=256 for fp8 per tensor, which fits both devices
    assert row.engine_default == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                                  "num_warps": 8, "num_stages": 3}
    assert row.source in ("search", "naive fix", "engine default")
    assert set(row.reasons) == {k for k in row.chosen if row.chosen[k] != row.original.get(k)}
    assert set(row.reasons.values()) <= {"to fit", "for speed", "engine default"}


def test_applicability_of_planned_fixes(tmp_path):
    path = write(tmp_path, FP8_H200, dump({"256": OFFENDING}, 4))
    result = run_check([str(path)], opts(fix=True))
    fixes = {id(d.fix): d.fix for d in result.diagnostics if d.fix is not None}
    assert fixes and all(f.applicability == Applicability.SAFE for f in fixes.values())
    assert all(f.expected and list(f.expected) == ["/256"] for f in fixes.values())


def test_sglang_down_pairs_keep_block_m(tmp_path):
    """SGLang's down GEMM runs with the up entry's BLOCK_SIZE_M: neither table of a pair moves it."""
    folder = tmp_path / "sglang" / "configs" / "triton_3_4_0"
    folder.mkdir(parents=True)
    up = folder / "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
    down = folder / "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8_down.json"
    table = {str(m): dict(OFFENDING) for m in (256, 1024, 4096)}
    up.write_bytes(dump(table, 4))
    down.write_bytes(dump(table, 4))
    result = run_fix([str(folder)], opts())
    assert result.exit_code == 0 and len(result.files) == 2
    for path in (up, down):
        for entry in json.loads(path.read_bytes()).values():
            assert entry["BLOCK_SIZE_M"] == 128


def test_settings_unsafe_fixes_and_fix_margin(tmp_path, cli):
    """``unsafe-fixes`` and ``fix-margin`` from [tool.tilefit]; the command line wins."""
    path = write(tmp_path, BF16_H200, dump({"1": UNSAFE_ONLY}, 4))
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.tilefit]\nunsafe-fixes = true\nfix-margin = 1024\nestimator = "analytic"\n'
                      'targets = ["rtx4090"]\n')
    res = cli("check", "--fix", "--no-unsafe-fixes", "--config", str(config), str(path))
    assert res.exit_code == 1 and json.loads(path.read_bytes())["1"] == UNSAFE_ONLY
    res = cli("check", "--fix", "--config", str(config), str(path))
    assert res.exit_code == 0, res.output
    assert json.loads(path.read_bytes())["1"]["BLOCK_SIZE_K"] < 2048


def test_write_atomic_leaves_the_old_file_and_no_temporary_on_failure(tmp_path, monkeypatch):
    import os

    from tilefit import atomicfile

    target = tmp_path / "table.json"
    target.write_bytes(b'{"1": {}}')
    target.chmod(0o640)

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomicfile.os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomicfile.write_atomic(target, "new", durable=True)
    assert target.read_bytes() == b'{"1": {}}' and os.listdir(tmp_path) == ["table.json"]
    monkeypatch.undo()
    atomicfile.write_atomic(target, "new", mode=0o640)
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["table.json"]


def test_apply_fixes_takes_the_fixes_the_all_pairs_check_takes():
    """apply_fixes checks a fix's ranges against the few taken ranges near them, not all taken
    ones (the all-pairs check was quadratic in a table's fixed entries): on random fix sets,
    insertions, touching ranges and fixes whose own edits overlap included, it takes the very
    fixes, and gives the very bytes, of the all-pairs check (``_overlaps`` against every taken
    range, the rule of ruff's isolation of overlapping fixes)."""
    import random

    from tilefit.fix.edits import _overlaps, apply_fixes
    from tilefit.model import Edit, Fix

    def all_pairs(fixes):
        taken, chosen = [], []
        for fix in sorted(fixes, key=lambda f: min((e.start_offset for e in f.edits), default=0)):
            ranges = [(e.start_offset, e.end_offset) for e in fix.edits]
            if not any(_overlaps(r, t) for r in ranges for t in taken):
                taken.extend(ranges)
                chosen.append(fix)
        return chosen

    rng = random.Random(19)
    data = bytes(range(48, 88))
    for _ in range(1000):
        fixes = []
        for n in range(rng.randint(0, 12)):
            edits = []
            for _ in range(rng.randint(1, 3)):
                a = rng.randint(0, 36)
                edits.append(Edit(a, a if rng.random() < 0.3 else a + rng.randint(1, 4), str(n)))
            fixes.append(Fix(f"fix {n}", tuple(edits), Applicability.SAFE))
        want = all_pairs(fixes)
        new, chosen = apply_fixes(data, fixes)
        assert [id(f) for f in chosen] == [id(f) for f in want]
        assert new == apply_edits(data, [e for f in want for e in f.edits])[0]
