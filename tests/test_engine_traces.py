"""The doctor against the engines' own lookup code, per engine (issue 19).

``tests/data/engine_traces/<engine>-<version>.json`` holds what SGLang's and vLLM's real
functions returned on fixtures (recorded by ``bench/engine_traces.py``, which runs them from
the engines' source; see its provenance): the default config at every batch size 1-4096 for
real MoE shapes, and, for folder layouts of tables, the file the engine loads (or the error it
raises) and the key it picks at every batch size. Each test rebuilds the same fixture, runs
``tilefit doctor`` (its restated lookup and default rules, no engine code) and compares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilefit.api import load_devices
from tilefit.config import Settings
from tilefit.doctor import run as R

TRACES = Path(__file__).resolve().parent / "data" / "engine_traces"
ENGINES = {"vllm": "vllm-0.33.0", "sglang": "sglang-0.5.23"}
TARGETS = {"NVIDIA GeForce RTX 4090": "rtx4090", "NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H200 NVL": "h200-nvl"}
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def trace(engine: str) -> dict:
    return json.loads((TRACES / f"{ENGINES[engine]}.json").read_text())


def expand(runs) -> dict[int, object]:
    return {m: value for lo, hi, value in runs for m in range(lo, hi + 1)}


def dtype_option(case: dict) -> str:
    if case["dtype"] is None:
        return "bf16"
    if case["block_shape"]:
        return f"{case['dtype']}:block={case['block_shape'][0]}x{case['block_shape'][1]}"
    return case["dtype"]


@pytest.fixture(scope="module")
def db():
    return load_devices(Settings())


def doctor_moe(db, case: dict, engine: str, *, engine_path: Path, env: dict | None = None,
               triton_version: str = "3.4.0", batch_sizes=None):
    shape = f"E={case['E']},N={case['N']},K={case.get('K', 4096)},topk={case.get('topk', 2)}"
    req = R.Request(shape=shape, dtype=dtype_option(case), engines=[engine], targets=[TARGETS[case["device"]]],
                    engine_path=str(engine_path), env=dict(env or {}), triton_version=triton_version,
                    batch_sizes=batch_sizes or list(range(1, 4097)), estimator="analytic")
    report = R.run(req, db)
    (section,) = report.sections
    return section, section.kernel("moe_up")


@pytest.mark.parametrize("engine", list(ENGINES))
def test_trace_provenance(engine):
    prov = trace(engine)["provenance"]
    assert prov["engine"] == engine and prov["recorded_by"] == "bench/engine_traces.py"
    assert prov["sources"] and all(len(h) == 64 for h in prov["sources"].values())
    assert prov["batch_sizes"] == "1-4096"


@pytest.mark.parametrize("engine", list(ENGINES))
def test_default_config_at_every_batch_size_matches_the_engine(db, engine, tmp_path):
    (tmp_path / engine).mkdir()  # an engine tree without tables: every batch size gets the default
    for case in trace(engine)["defaults"]:
        _section, up = doctor_moe(db, case, engine, engine_path=tmp_path)
        assert up.lookup is not None and not up.lookup.found
        ours = {m: {k: v for k, v in row.config.items() if k in KEYS}
                for row in up.rows for m in range(row.m_from, row.m_to + 1)}
        theirs = {m: {k: v for k, v in cfg.items() if k in KEYS} for m, cfg in expand(case["runs"]).items()}
        wrong = sorted(m for m in theirs if ours.get(m) != theirs[m])
        assert not wrong, (f"{engine} E={case['E']} N={case['N']} {case['dtype']} {case['block_shape']} on "
                           f"{case['device']}: M {wrong[0]}-{wrong[-1]} ({len(wrong)} sizes): doctor "
                           f"{ours.get(wrong[0])}, engine {theirs[wrong[0]]}")


def _place(tmp_path: Path, engine: str, rel: str, text: str) -> Path:
    """A trace's fixture path: ``pkg/...`` in the engine's package folder, ``override/...`` in the
    override folder."""
    from tilefit.serving.profiles import find_profile

    profile, _ = find_profile(engine, ENGINES[engine].split("-", 1)[1])
    package = tmp_path / "root" / profile.moe.package_dir
    if engine == "vllm":  # vLLM's package_dir is the configs folder itself
        package = package.parent
    head, rest = rel.split("/", 1)
    path = (package if head == "pkg" else tmp_path / "override") / rest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("engine", list(ENGINES))
def test_lookup_loads_the_file_the_engine_loads_and_picks_its_keys(db, engine, tmp_path):
    data = trace(engine)
    table = {"1": {"BLOCK_SIZE_M": 16}, "3": {"BLOCK_SIZE_M": 32}, "64": {"BLOCK_SIZE_M": 64},
             "100": {"BLOCK_SIZE_M": 128}}
    for i, case in enumerate(data["lookups"]):
        work = tmp_path / str(i)
        (work / "root" / engine).mkdir(parents=True)
        (work / "override").mkdir()
        paths = {}
        for j, rel in enumerate(case["files"]):
            content = dict(table, **({"triton_version": "3.4.0"} if engine == "vllm" else {}),
                           **{"2048": {"BLOCK_SIZE_M": 8 + j}})
            paths[rel] = _place(work, engine, rel, json.dumps(content))
        env_var = "VLLM_TUNED_CONFIG_FOLDER" if engine == "vllm" else "SGLANG_MOE_CONFIG_DIR"
        env = {env_var: str(work / "override")} if case["env"] else {}
        section, up = doctor_moe(db, case, engine, engine_path=work / "root", env=env,
                                 triton_version=case.get("triton_version", "3.4.0"),
                                 batch_sizes=list(range(1, 4097)))
        what = f"{engine}: {case['case']} ({case['name']})"
        assert up.lookup.name == case["name"], what
        if case.get("error"):
            # the engine raises before any launch: a failure of its own, not a shared-memory verdict
            assert up.lookup.problem and case["error"] in up.lookup.problem, what
            assert up.fails and not up.overflows and section.fails and not section.overflows, what
            continue
        assert up.lookup.problem is None, what
        if case["loaded"] is None:
            assert not up.lookup.found, what
            assert {r.source for r in up.rows} == {"default"}, what
            continue
        assert up.lookup.path == str(paths[case["loaded"]]), what
        assert sorted(up.lookup.table) == case["keys"], what
        picked = {m: row.key for row in up.rows for m in range(row.m_from, row.m_to + 1)}
        assert picked == expand(case["picks"]), what
