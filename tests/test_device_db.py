"""The device database: bundled data, lookups, groups, user files, validation cache."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tilefit import device_db
from tilefit.device_db import (
    Device,
    DeviceDBError,
    UnknownDevice,
    UnknownTarget,
    load_database,
)
from tilefit.device_db import cache as vcache
from tilefit.device_db import loader, validation
from tilefit.serving.naming import device_for_file_name

REPO = Path(__file__).resolve().parents[1]
PKG = Path(device_db.__file__).parent
DEVICES_DIR = PKG / "devices"
DEVICE_FILES = sorted(DEVICES_DIR.glob("*.json"))
SCHEMA = json.loads((PKG / "schema.json").read_text())
DEVICES_CSV = REPO.parent / "shared" / "docs" / "devices.csv"

REQUIRED_ARCH_KEYS = {
    "sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110",
    "sm_120", "sm_121", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201",
}
# Fields that carry a fact and therefore need a status code when they are known.
FACT_FIELDS = [
    "file_names", "torch_names", "arch", "sm_count", "smem_per_block_optin", "smem_per_sm",
    "smem_static_per_block", "reserved_smem_per_block", "regs_per_sm", "regs_per_block",
    "max_regs_per_thread", "max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm",
    "warp_size", "l2_bytes", "memory_gb", "memory_bandwidth_gbps", "boost_clock_mhz",
    "triton_fp8_dtypes", "mma", "features",
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Every test gets its own validation cache, so no test depends on another's log."""
    monkeypatch.setenv(vcache.ENV_VAR, str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def db():
    return load_database()


def write(tmp_path: Path, name: str, content) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def card(**fields) -> dict:
    base = {"key": "rtx4070", "kind": "card", "vendor": "NVIDIA", "name": "NVIDIA GeForce RTX 4070",
            "arch": "sm_89", "segment": "consumer", "file_names": ["NVIDIA_GeForce_RTX_4070"],
            "aliases": ["4070"], "sm_count": 46}
    base.update(fields)
    return base


# --------------------------------------------------------------------------- bundled data


def test_schemas_are_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator.check_schema(json.loads((PKG / "groups.schema.json").read_text()))
    jsonschema.Draft202012Validator(json.loads((PKG / "groups.schema.json").read_text())).validate(
        json.loads((PKG / "groups.json").read_text())
    )


@pytest.mark.parametrize("path", DEVICE_FILES, ids=lambda p: p.stem)
def test_bundled_file_is_valid_and_complete(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(data)]
    assert errors == []
    assert data["key"] == path.stem
    # Bundled files spell out every field (unknown = null) so nothing is silently inherited.
    assert set(data) == set(SCHEMA["properties"]) - {"$schema"}


def test_bundled_database_counts(db):
    cards = [d for d in db.devices if d.kind == "card"]
    arches = [d for d in db.devices if d.kind == "arch"]
    assert len(DEVICE_FILES) == len(db.devices) == 86
    assert len(cards) == 66  # 63 rows of devices.csv + RTX 5880 Ada, MI455X, Radeon 8060S
    assert {d.key for d in arches} >= REQUIRED_ARCH_KEYS
    assert {d.key for d in arches} - REQUIRED_ARCH_KEYS == {"gfx1151", "gfx1250", "xe2"}
    assert db.devices[: len(cards)] == tuple(cards)  # cards first


def test_every_card_has_an_arch_entry_that_agrees_with_it(db):
    compared = ["smem_per_block_optin", "smem_per_sm", "reserved_smem_per_block", "max_threads_per_sm",
                "max_blocks_per_sm", "warp_size", "triton_fp8_dtypes", "mma", "features", "compute_capability"]
    for dev in db.cards:
        arch = db.arch_device(dev.arch)
        assert arch.kind == "arch" and arch.vendor == dev.vendor, dev.key
        for name in compared:
            assert getattr(dev, name) == getattr(arch, name), (dev.key, name)


def test_status_rates_exactly_the_known_facts(db):
    for dev in db.devices:
        for name in FACT_FIELDS:
            value = getattr(dev, name)
            known = value not in (None, ())
            assert (name in dev.status) == known, (dev.key, name, value)
        tt = dev.tensor_tflops
        for dtype in device_db.TENSOR_DTYPES:
            known = tt is not None and getattr(tt, dtype) is not None
            assert (f"tensor_tflops.{dtype}" in dev.status) == known, (dev.key, dtype)
        assert all(re.fullmatch(r"[CTDIU](/[CTDIU])?", code) for code in dev.status.values()), dev.key
        assert dev.sources, dev.key


def test_sources_are_documented(db):
    sources = json.loads((PKG / "sources.json").read_text())
    assert all(isinstance(v, str) and v for v in sources.values())
    used = {s for dev in db.devices for s in dev.sources}
    assert used <= set(sources), used - set(sources)


def test_l20y_is_an_unverified_sm89_part(db):
    l20y = db.get("l20y")
    assert (l20y.arch, l20y.cc, l20y.smem_per_block_optin) == ("sm_89", 89, 101376)
    assert l20y.status_of("arch") == "U"
    assert l20y.status_of("smem_per_block_optin") == "U"
    assert l20y.sm_count is None and l20y.tensor_tflops is None


def _csv_rows():
    if not DEVICES_CSV.is_file():
        pytest.skip(f"{DEVICES_CSV} not present")
    return list(csv.DictReader(DEVICES_CSV.open(encoding="utf-8")))


def _csv_num(text: str):
    text = text.strip()
    if text in ("", "?", "-"):
        return None
    m = re.match(r"\d+(\.\d+)?", text)
    return float(m.group(0))


def test_every_devices_csv_row_is_a_card_with_its_figures(db):
    rows = _csv_rows()
    seen = set()
    for row in rows:
        file_name = re.match(r"[^\s;]+", row["device_name_file_form"]).group(0)
        dev = db.by_file_name(file_name)
        assert dev is not None and dev.kind == "card", file_name
        seen.add(dev.key)
        assert dev.file_name == file_name
        for column, attr in [
            ("sm_or_cu_count", "sm_count"),
            ("smem_optin_per_block_bytes", "smem_per_block_optin"),
            ("smem_per_sm_bytes", "smem_per_sm"),
            ("max_blocks_per_sm", "max_blocks_per_sm"),
            ("mem_bw_gbs", "memory_bandwidth_gbps"),
            ("boost_mhz", "boost_clock_mhz"),
        ]:
            assert _csv_num(row[column]) == getattr(dev, attr), (file_name, attr)
        l2 = _csv_num(row["l2_mb"])
        assert dev.l2_bytes == (None if l2 is None else round(l2 * 1048576)), file_name
        fp8 = _csv_num(row["dense_fp8_tflops"])
        assert (dev.tensor_tflops.fp8 if dev.tensor_tflops else None) == fp8, file_name
        gfx = row["compute_capability_or_gfx"].rstrip("?")
        if dev.is_nvidia:
            assert dev.cc == round(float(gfx) * 10), file_name
        else:
            assert dev.arch == gfx.split()[0], file_name
    assert len(seen) == len(rows) == 63


# --------------------------------------------------------------------------- the corpus

_DEVICE_IN_NAME = re.compile(r"(?:^|,)(?:device_name|device)=(.*?)(?=,[A-Za-z_][A-Za-z0-9_]*=|$)")


def corpus_device_names(files):
    """(name, engine, family) for every device a corpus file name names, extracted here
    independently of tilefit.families."""
    for path in files:
        stem = path.name[: -len(".json")]
        engine = "sglang" if "sglang-0.5.23" in path.parts else "vllm"
        if "helion" in path.parts and path.parent.parent.name == "configs" and engine == "vllm":
            yield stem, engine, "helion"
            continue
        m = _DEVICE_IN_NAME.search(stem)
        if m is None:
            continue
        name = m.group(1)
        name = name[: -len("_down")] if name.endswith("_down") else name
        family = "fused_moe" if "fused_moe" in path.parts or "moe_runner" in path.parts else None
        yield name, engine, family


def test_every_corpus_device_name_resolves(db, corpus_files):
    names = {}
    for name, engine, family in corpus_device_names(corpus_files):
        names.setdefault(name, set()).add((engine, family))
    assert len(names) == 45  # 41 names after device_name=/device=, 3 Helion platforms, the empty one
    unresolved = []
    for name, contexts in names.items():
        for engine, family in contexts:
            for kwargs in ({"engine": engine, "family": family}, {}):
                dev = device_for_file_name(db, name, **kwargs)
                if name == "":
                    assert dev is None
                elif dev is None:
                    unresolved.append((name, kwargs))
    assert unresolved == []


# names whose device was chosen by judgement (see the notes in the data files)
JUDGEMENT = {
    "AMD_Radeon_Graphics": "gfx942",
    "NVIDIA_H100": "h100-sxm",
    "AMD_Instinct_MI350_OAM": "mi350x",
    "AMD_Instinct_MI355_OAM": "mi355x",
    "AMD_Instinct_MI325_OAM": "mi325x",
    "AMD_Instinct_MI300XHF_OAM": "mi300x-hf",
    "MI308X": "mi308x",
    "Radeon_8060S_Graphics": "radeon-8060s",
    "AMD_Instinct_MI455X": "mi455x",
    "NVIDIA_RTX_5880_Ada_Generation": "rtx5880-ada",
    "NVIDIA_L20Y": "l20y",
}


@pytest.mark.parametrize("name,key", sorted(JUDGEMENT.items()))
def test_judgement_names(db, name, key):
    assert db.by_file_name(name).key == key


@pytest.mark.parametrize("name,limit", [
    # engines.md section 6: the ~99 KiB class and the reference limits
    ("NVIDIA_L20", 101376), ("NVIDIA_L40S", 101376), ("NVIDIA_GeForce_RTX_4090", 101376),
    ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", 101376), ("NVIDIA_GB10", 101376),
    ("NVIDIA_RTX_5880_Ada_Generation", 101376), ("NVIDIA_A100-SXM4-80GB", 166912),
    ("NVIDIA_H200", 232448), ("NVIDIA_B200", 232448), ("NVIDIA_GB300", 232448),
    ("AMD_Instinct_MI300X", 65536), ("AMD_Instinct_MI355_OAM", 163840), ("AMD_Radeon_Graphics", 65536),
    ("AMD_Instinct_MI455X", 327680), ("Intel(R)_Arc(TM)_Pro_B70_Graphics", None),
])
def test_corpus_names_get_their_shared_memory_class(db, name, limit):
    assert db.by_file_name(name).smem_per_block_optin == limit


# --------------------------------------------------------------------------- engine rules


def test_vllm_folds_h200_variants_for_fused_moe_only(db):
    """The fold is vLLM's rule (its profile); the database applies it when asked."""
    assert device_for_file_name(db, "NVIDIA_H200_141GB", engine="vllm", family="fused_moe").key == "h200"
    assert device_for_file_name(db, "NVIDIA_H200_141GB", engine="vllm").key == "h200"
    assert device_for_file_name(db, "NVIDIA_H200_141GB", family="vl.fused_moe").key == "h200"
    assert device_for_file_name(db, "NVIDIA_H200_141GB", engine="vllm", family="w8a8_gemm") is None
    assert device_for_file_name(db, "NVIDIA_H200_141GB", engine="sglang", family="fused_moe") is None
    assert device_for_file_name(db, "NVIDIA_H200_141GB") is None
    # an exact spelling wins over the fold
    assert device_for_file_name(db, "NVIDIA_H200_NVL", engine="vllm", family="fused_moe").key == "h200-nvl"
    # GH200 has no H200 token
    assert device_for_file_name(db, "NVIDIA_GH200_144G_HBM3e", engine="vllm", family="fused_moe").key == "gh200-144gb"


def test_engine_spellings_and_torch_names(db):
    assert db.by_file_name("NVIDIA GeForce RTX 4090").key == "rtx4090"
    assert db.by_file_name("NVIDIA  GeForce RTX 4090", engine="vllm").key == "rtx4090"
    assert db.by_file_name("AMD Instinct MI250X/MI250", engine="vllm").key == "mi250x"
    assert db.by_file_name("AMD Instinct MI300X", engine="sglang").key == "mi300x"
    assert db.by_file_name("NVIDIA A100-PCIE-40GB").key == "a100-pcie-40gb"
    assert db.by_file_name("nvidia_a100-pcie-40gb").key == "a100-pcie-40gb"  # spelling-insensitive
    assert db.by_file_name("Orin").key == "orin"
    assert db.by_file_name("AMD_Radeon_8060S").key == "radeon-8060s"
    assert db.by_file_name("NVIDIA_Imaginary_X1") is None
    assert db.by_file_name("") is None and db.by_file_name("   ") is None


@pytest.mark.parametrize("platform,key", [
    ("nvidia_h100", "h100-sxm"), ("nvidia_h200", "h200"), ("nvidia_b200", "b200"),
    ("nvidia_a100", "a100-sxm4-80gb"), ("nvidia_rtx_pro_6000", "rtx-pro-6000"),
])
def test_helion_platform_names(db, platform, key):
    assert db.by_file_name(platform, engine="vllm", family="helion").key == key
    assert db.by_file_name(platform).key == key


# --------------------------------------------------------------------------- targets


@pytest.mark.parametrize("spec,keys", [
    ("rtx4090", ["rtx4090"]), ("RTX4090", ["rtx4090"]), ("4090", ["rtx4090"]), ("h100", ["h100-sxm"]),
    ("NVIDIA_GeForce_RTX_4090", ["rtx4090"]), ("NVIDIA GeForce RTX 4090", ["rtx4090"]),
    ("sm_89", ["sm_89"]), ("sm89", ["sm_89"]), ("SM_89", ["sm_89"]), ("8.9", ["sm_89"]),
    ("sm_90a", ["sm_90"]), ("12.0", ["sm_120"]), ("sm_121", ["sm_121"]), ("10.3", ["sm_103"]),
    ("gfx942", ["gfx942"]), ("gfx942:sramecc+:xnack-", ["gfx942"]), ("cdna3", ["gfx942"]),
    ("rtx4090, l40s,4090", ["rtx4090", "l40s"]),
])
def test_resolve_target(db, spec, keys):
    assert [d.key for d in db.resolve_target(spec)] == keys


def test_arch_targets_carry_the_per_arch_limits(db):
    (sm89,) = db.resolve_target("sm_89")
    assert (sm89.kind, sm89.cc, sm89.smem_per_block_optin, sm89.max_blocks_per_sm) == ("arch", 89, 101376, 24)
    assert "fp8e4nv" in sm89.triton_fp8_dtypes
    (sm80,) = db.resolve_target("8.0")
    assert sm80.smem_per_block_optin == 166912 and "fp8e4nv" not in sm80.triton_fp8_dtypes
    (sm120,) = db.resolve_target("sm_120")
    assert (sm120.mma, sm120.arch_family, sm120.max_blocks_per_sm) == ("mma_v2", "mma_v2", 24)
    assert db.arch_device("sm_90a").smem_per_block_optin == 232448
    assert db.arch_device("gfx950").smem_per_block_optin == 163840
    assert db.arch_device("9.0").mma == "wgmma"


def test_groups(db):
    cards = [d for d in db.devices if d.kind == "card"]
    assert set(db.groups["smem-99k"]) == {d.key for d in cards if d.smem_per_block_optin == 101376}
    assert set(db.groups["datacenter"]) == {d.key for d in cards if d.segment == "datacenter"}
    assert set(db.groups["all"]) == {d.key for d in cards} and len(db.groups["all"]) == len(cards)
    assert {"rtx4090", "rtx5090", "l40s", "l20", "gb10", "rtx-pro-6000-server", "a10"} <= set(db.groups["smem-99k"])
    # consumer: the cards people own (issue 19), not every 99 KB part
    consumer = set(db.groups["consumer"])
    assert {"rtx3080", "rtx3090", "rtx4080", "rtx4090", "rtx4090d", "rtx5080", "rtx5090",  # GeForce
            "rtx-a6000", "rtx6000-ada", "rtx5880-ada", "rtx-pro-6000", "rtx-pro-6000-maxq",  # RTX workstation
            "gb10", "orin", "thor"} == consumer  # DGX Spark, Jetson
    assert not {"a10", "a10g", "a40", "l4", "l40s", "l20", "rtx-pro-6000-server", "h100-sxm", "mi300x",
                "rx7900xtx", "rtx2080ti", "sm_89"} & consumer
    assert not {"h100-sxm", "a100-sxm4-80gb", "mi300x", "sm_89"} & set(db.groups["smem-99k"])
    assert {"h100-sxm", "mi300x", "l40s"} <= set(db.groups["datacenter"])
    assert "rtx4090" not in db.groups["datacenter"]
    # the members people know lead (messages name a group's first three devices)
    assert db.groups["consumer"][:3] == ("rtx4090", "rtx5090", "rtx3090")
    # ... in the wide groups too ("a10, a100-pcie-40gb, a100-pcie-80gb and 11 more" was by key)
    assert db.groups["datacenter"][:3] == ("h100-sxm", "h200", "a100-sxm4-80gb")
    assert db.groups["all"][:4] == ("rtx4090", "rtx5090", "rtx3090", "h100-sxm")
    assert [d.key for d in db.resolve_target("consumer")] == list(db.groups["consumer"])
    assert [d.key for d in db.resolve_target("rtx5090,consumer")][:3] == ["rtx5090", "rtx4090", "rtx3090"]
    assert len(db.resolve_target("ALL")) == 66
    groups_json = json.loads((PKG / "groups.json").read_text())
    assert groups_json["groups"]["smem-99k"]["match"] == {"kind": "card", "smem_per_block_optin": 101376}
    assert set(db.group_descriptions) == {"consumer", "smem-99k", "datacenter", "all"}


@pytest.mark.parametrize("spec,suggested", [
    ("rtx4909", "rtx4090"), ("h10o", "h100"), ("consumr", "consumer"), ("mi300", "mi300x"),
])
def test_unknown_target_suggests_close_matches(db, spec, suggested):
    with pytest.raises(UnknownTarget) as info:
        db.resolve_target(spec)
    assert suggested in info.value.suggestions
    message = str(info.value)
    assert spec in message and suggested in message and "tilefit devices" in message
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize("spec", ["", "sm_95", "gfx1036", "rtx4090,bogus-gpu", "nonsense"])
def test_unknown_targets_raise(db, spec):
    with pytest.raises(UnknownTarget, match="tilefit devices"):
        db.resolve_target(spec)


def test_get_and_arch_device_errors(db):
    assert db.get("rtx4090").key == "rtx4090" and db.get("RTX4090").key == "rtx4090"
    with pytest.raises(UnknownDevice) as info:
        db.get("rtx409")
    assert str(info.value).startswith("unknown device key 'rtx409'")  # not KeyError's repr
    assert "rtx4090" in info.value.suggestions
    with pytest.raises(KeyError):
        db.get("nope")
    with pytest.raises(UnknownDevice, match="no arch entry"):
        db.arch_device("sm_95")


# --------------------------------------------------------------------------- the Device record


def test_device_record(db):
    dev = db.get("rtx4090")
    assert dev.is_nvidia and not dev.is_amd and dev.is_card and dev.cc == 89
    assert dev.compute_capability == (8, 9) and isinstance(dev.file_names, tuple)
    assert dev.arch_family == "mma_v2" and db.get("h100-sxm").arch_family == "wgmma"
    assert db.get("b200").arch_family == "tcgen05" and db.get("mi300x").arch_family == "amd"
    assert db.get("mi300x").cc is None and db.get("arc-pro-b70").arch_family is None
    assert db.get("t4").arch_family == "fma" and db.get("t4").triton_fp8_dtypes == ("fp8e4b15", "fp8e5")
    assert dev.tensor_tflops.fp16_fp32acc == 165.2
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.sm_count = 1
    assert len({*db.devices, *db.devices}) == len(db.devices)  # hashable
    assert "status" in dataclasses.asdict(dev)  # plain containers: asdict works
    for d in db.devices:
        data = d.to_dict()
        jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(data)))
        assert Device.from_dict(data) == d


# --------------------------------------------------------------------------- user files


def test_user_file_adds_a_device_that_inherits_arch_limits(tmp_path):
    path = write(tmp_path, "mine.json", card())
    db = load_database([path])
    dev = db.get("rtx4070")
    assert dev.origin == str(path)
    assert (dev.smem_per_block_optin, dev.max_blocks_per_sm, dev.warp_size) == (101376, 24, 32)
    assert dev.triton_fp8_dtypes == ("fp8e4b15", "fp8e4nv", "fp8e5") and dev.compute_capability == (8, 9)
    assert dev.status_of("smem_per_block_optin") == "I"
    assert dev.l2_bytes is None and dev.status_of("l2_bytes") is None
    assert "rtx4070" in db.groups["consumer"] and "rtx4070" in db.groups["all"]
    assert db.by_file_name("NVIDIA GeForce RTX 4070").key == "rtx4070"
    assert [d.key for d in db.resolve_target("4070")] == ["rtx4070"]
    assert len(db) == len(load_database()) + 1
    assert "rtx4070" not in load_database()  # the bundled database is untouched


def test_user_file_list_adds_and_overrides(tmp_path):
    override = json.loads((DEVICES_DIR / "rtx4090.json").read_text())
    override.update(sm_count=130, aliases=["my4090"], sources=["measured on my card"])
    path = write(tmp_path, "list.json", [card(), override])
    db = load_database([str(path)])
    dev = db.get("rtx4090")
    assert dev.sm_count == 130 and dev.origin == f"{path}: $[1]"
    assert [d.key for d in db.resolve_target("my4090")] == ["rtx4090"]
    with pytest.raises(UnknownTarget):
        db.resolve_target("rtx-4090")  # the bundled entry's aliases went with it
    assert db.by_file_name("NVIDIA_GeForce_RTX_4090").sm_count == 130
    assert sum(d.key == "rtx4090" for d in db.devices) == 1
    assert load_database().get("rtx4090").sm_count == 128


def test_user_can_override_an_arch_entry_and_cards_inherit_it(tmp_path):
    arch = json.loads((DEVICES_DIR / "sm_89.json").read_text())
    arch["smem_per_block_optin"] = 99000
    db = load_database([write(tmp_path, "a.json", arch), write(tmp_path, "b.json", card())])
    assert db.get("rtx4070").smem_per_block_optin == 99000
    assert db.get("rtx4090").smem_per_block_optin == 101376  # bundled cards spell theirs out
    assert "rtx4070" not in db.groups["smem-99k"] and "rtx4070" in db.groups["consumer"]


def _load_error(tmp_path, *contents) -> str:
    paths = [write(tmp_path, f"user{i}.json", c) for i, c in enumerate(contents)]
    with pytest.raises(DeviceDBError) as info:
        load_database(paths)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(tmp_path))
    return message


@pytest.mark.parametrize("content,expected", [
    ('{"key": "x",', r"user0\.json:1:\d+: invalid JSON: "),
    ("", r"user0\.json:1:1: invalid JSON: Expecting value"),
    ("5", r"user0\.json: \$: expected a device object or a list of device objects, got a number"),
    (card(sm_count="many"), r"user0\.json: \$\.sm_count: 'many' is not of type 'integer', 'null'"),
    (card(arch=None) | {"arch": 89}, r"user0\.json: \$\.arch: 89 is not of type 'string'"),
    ({k: v for k, v in card().items() if k != "arch"}, r"user0\.json: \$: 'arch' is a required property"),
    ({k: v for k, v in card().items() if k != "segment"}, r"user0\.json: \$: 'segment' is a required property"),
    ([card(), card(key="x2", kind="gpu")], r"user0\.json: \$\[1\]\.kind: 'gpu' is not one of"),
    (card(smem=5), r"user0\.json: \$: Additional properties are not allowed \('smem' was unexpected\)"),
    (card(aliases=["RTX4070"]), r"user0\.json: \$\.aliases\[0\]: 'RTX4070' does not match"),
    (card(file_names=["NVIDIA GeForce RTX 4070"]), r"user0\.json: \$\.file_names\[0\]: .* does not match"),
    (card(arch="gfx942"), r"user0\.json: \$\.arch: 'gfx942' does not match '\^sm_'"),
    (card(status={"sm_count": "X"}), r"user0\.json: \$\.status\.sm_count: 'X' does not match"),
    (card(compute_capability=[9, 0]), r"user0\.json: \$\.compute_capability: \[9, 0\] does not match arch 'sm_89'"),
    ('{"key": "a", "key": "b"}', r"user0\.json: duplicate JSON object key 'key'"),
])
def test_malformed_user_files(tmp_path, content, expected):
    assert re.search(expected, _load_error(tmp_path, content))


@pytest.mark.parametrize("fields,expected", [
    ({"aliases": ["4090"]}, r"duplicate key/alias '4090': device 'rtx4070' clashes with device 'rtx4090'"),
    ({"aliases": ["h100-sxm"]}, r"duplicate key/alias 'h100-sxm'"),
    ({"file_names": ["NVIDIA_H200"]}, r"duplicate file name 'NVIDIA_H200'"),
    ({"torch_names": ["NVIDIA H200"]}, r"duplicate torch name 'NVIDIA H200'"),
])
def test_user_device_clashing_with_bundled_names(tmp_path, fields, expected):
    message = _load_error(tmp_path, card(**fields))
    assert re.search(expected, message)
    assert "user0.json" in message and "devices/" in message  # both origins


def test_user_alias_may_not_be_a_group_name(tmp_path):
    message = _load_error(tmp_path, card(aliases=["consumer"]))
    assert re.search(r"user0\.json: key or alias 'consumer' of device 'rtx4070' is the name of a group", message)


def test_same_key_in_two_user_files(tmp_path):
    message = _load_error(tmp_path, card(), card(aliases=[], file_names=[]))
    assert re.search(r"user1\.json: \$\.key: duplicate device key 'rtx4070' \(also defined in .*user0\.json\)", message)


def test_unreadable_and_binary_user_files(tmp_path):
    with pytest.raises(DeviceDBError, match=r"missing\.json: cannot read device file"):
        load_database([tmp_path / "missing.json"])
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(DeviceDBError, match=r"bin\.json: not UTF-8 text"):
        load_database([path])


def test_the_same_file_twice_is_read_once(tmp_path):
    path = write(tmp_path, "mine.json", card())
    assert load_database([path, tmp_path / "." / "mine.json"]).get("rtx4070").sm_count == 46


# --------------------------------------------------------------------------- validation cache


def test_validation_is_cached_by_content(tmp_path, monkeypatch):
    calls = []
    real = validation.validate

    def spy(schema, label, instances):
        calls.append(label)
        return real(schema, label, instances)

    monkeypatch.setattr(validation, "validate", spy)
    path = write(tmp_path, "mine.json", card())
    load_database([path])
    assert calls == [str(path)]
    load_database([path])
    assert calls == [str(path)]  # same bytes: digest found in the log, no validation
    write(tmp_path, "mine.json", card(sm_count=47))
    assert load_database([path]).get("rtx4070").sm_count == 47
    assert calls == [str(path)] * 2
    log = tmp_path / "cache" / "device_db" / vcache.ValidityCache.LOG
    assert [len(line) for line in log.read_bytes().splitlines()] == [64, 64]
    assert list(log.parent.iterdir()) == [log]  # one log, no file per digest


def test_validity_log_holds_whole_digests_only(tmp_path):
    # a torn line (a crash mid-append) never vouches for content: not its prefix, not the line
    # the next append joins it to; old marker files are ignored; a second cache sees the first's lines
    first = vcache.ValidityCache("ns", b"v")
    good, torn, later = (first.digest(bytes([i])) for i in range(3))
    first.remember(good)
    with open(first.directory / first.LOG, "ab") as f:
        f.write(torn[:20].encode())
    (first.directory / f"{torn}.ok").touch()  # a marker file of an older tilefit
    first.remember(later)
    second = vcache.ValidityCache("ns", b"v")
    assert second.is_valid(good)
    assert not second.is_valid(torn) and not second.is_valid(torn[:20])
    assert not second.is_valid(later)  # joined to the torn line: validated again, remembered anew
    second.remember(later)
    assert vcache.ValidityCache("ns", b"v").is_valid(later)


def test_validity_log_survives_concurrent_appends(tmp_path):
    # forked workers and concurrent runs append to one log: every digest each remembered is kept whole
    cache = vcache.ValidityCache("ns", b"v")
    keys = [cache.digest(str(i).encode()) for i in range(400)]
    pids = []
    for part in range(4):
        pid = os.fork()
        if pid == 0:
            mine = vcache.ValidityCache("ns", b"v")
            for key in keys[part::4]:
                mine.remember(key)
            os._exit(0)
        pids.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
    fresh = vcache.ValidityCache("ns", b"v")
    assert all(fresh.is_valid(key) for key in keys)
    assert len((cache.directory / cache.LOG).read_bytes().splitlines()) == 400


def test_invalid_content_is_never_cached(tmp_path):
    path = write(tmp_path, "bad.json", card(sm_count=-1))
    for _ in range(2):
        with pytest.raises(DeviceDBError, match=r"\$\.sm_count: -1 is less than the minimum of 1"):
            load_database([path])


def test_cache_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv(vcache.ENV_VAR, "")
    assert vcache.cache_dir() is None
    load_database([write(tmp_path, "mine.json", card())])
    assert not (tmp_path / "cache").exists()


def _load_bundled_afresh():
    loader._bundled.cache_clear()
    loader._bundled_database.cache_clear()
    try:
        return load_database()
    finally:
        loader._bundled.cache_clear()
        loader._bundled_database.cache_clear()


def test_shipped_digest_names_the_bundle_that_validates():
    # the fast path trusts bundled bytes with this digest: they must be the current files, and
    # every one of them must pass the full validation (else: fix the data, then write
    # loader.bundle_digest() into device_db/validated.sha256)
    assert loader.shipped_digest() == loader.bundle_digest(), \
        f"device_db/validated.sha256 must hold {loader.bundle_digest()} (after the data validates)"
    schema = (PKG / "schema.json").read_bytes()
    for path in DEVICE_FILES:
        validation.validate(schema, str(path), [("$", json.loads(path.read_bytes()))])
    validation.validate((PKG / "groups.schema.json").read_bytes(), "groups.json",
                        [("$", json.loads((PKG / "groups.json").read_text()))])


def _spy_validation(monkeypatch) -> list:
    calls = []
    real = validation.validate
    monkeypatch.setattr(validation, "validate", lambda *a: calls.append(a[1]) or real(*a))
    monkeypatch.setenv(vcache.ENV_VAR, "")  # no validity log either
    return calls


def test_bundled_data_with_the_shipped_digest_is_not_validated_again(monkeypatch):
    calls = _spy_validation(monkeypatch)
    assert len(_load_bundled_afresh()) == len(DEVICE_FILES)
    assert calls == []


def test_bundled_data_is_validated_when_its_digest_is_not_the_shipped_one(monkeypatch):
    calls = _spy_validation(monkeypatch)
    monkeypatch.setattr(loader, "shipped_digest", lambda: "0" * 64)
    db = _load_bundled_afresh()
    assert len(calls) == len(DEVICE_FILES) + 1  # every device file and groups.json
    assert len(db) == len(DEVICE_FILES)


def test_a_changed_bundled_file_is_validated_with_the_usual_message(monkeypatch):
    # bytes that differ from the validated ones miss the shipped digest: the full validation
    # runs and names the bad field, as for a user's file
    calls = _spy_validation(monkeypatch)
    real = loader._bundle_files

    def changed(root):
        schema, groups_schema, groups, files = real(root)
        label, name, data = files[0]
        bad = json.loads(data)
        bad["sm_count"] = -1
        return schema, groups_schema, groups, [(label, name, json.dumps(bad).encode())] + files[1:]

    monkeypatch.setattr(loader, "_bundle_files", changed)
    message = rf"{re.escape(DEVICE_FILES[0].name)}: \$\.sm_count: -1 is less than the minimum of 1"
    with pytest.raises(DeviceDBError, match=message):
        _load_bundled_afresh()
    assert calls == [str(DEVICE_FILES[0])]  # the first file, found bad


def test_warm_load_does_not_import_jsonschema(tmp_path):
    code = (
        "import sys\n"
        "import tilefit.device_db as m\n"
        "db = m.load_database()\n"
        "print(len(db), 'jsonschema' in sys.modules)\n"
    )
    env = dict(os.environ, TILEFIT_CACHE_DIR=str(tmp_path / "c"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    cold, warm = (r.stdout.split() for r in runs)
    # the bundled files' digest is the shipped one (validated.sha256): neither run validates
    # them, nor remembers a digest (a user's file is validated with the fast test alone:
    # test_validation_is_cached_by_content)
    assert cold == ["86", "False"]
    assert warm == ["86", "False"]
    assert not any((tmp_path / "c").rglob("*"))
    # importing the package alone never pulls jsonschema in
    out = subprocess.run([sys.executable, "-c", "import sys, tilefit.device_db; print('jsonschema' in sys.modules)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
