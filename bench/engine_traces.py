"""Record what the engines' own fused-MoE lookup code does, as small JSON traces for the tests.

    python bench/engine_traces.py --src /work/engines/src --out tests/data/engine_traces

The doctor restates SGLang's and vLLM's config lookup (the file name, the folders searched, the
nearest batch-size key, the default config at each batch size) in tilefit's own code and data
(`linter/doctor/lookup.py`, `linter/data/engine_profiles/`). This script runs the engines' real
pure-Python functions on fixtures and writes what they returned, so
`tests/test_engine_traces.py` compares the doctor with the engines without engine code in the
repository and without importing an engine (it needs torch, CUDA, the engine's plugins).

How: the functions are taken from the engine's source file by AST (`get_config_file_name`,
`get_moe_configs`, `get_default_config`, `try_get_optimal_moe_config`'s nearest-key rule) and
run with `exec` in a namespace where the engine's imports are replaced by stand-ins that hold
only what these functions read: the GPU's name and opt-in shared memory per block, the Triton
version, the environment variables, the package folder (`__file__`), and vLLM's
`VLLM_BATCH_INVARIANT` (off). Each stand-in is listed in the trace's provenance. Nothing of the
engines is written to the output but their results. Run it against a new engine release to
refresh the traces (and the profile the doctor reads).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import types
from pathlib import Path

VLLM_FILE = "vllm/model_executor/layers/fused_moe/fused_moe.py"
VLLM_NAME_FILE = "vllm/utils/platform_utils.py"
SGLANG_FILE = "sglang/srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py"

# (E, N, K, topk, dtype, block_shape): shapes of real MoE models (Mixtral 8x7B, Qwen3-30B-A3B,
# DeepSeek-V3 at TP 8, Qwen3-235B) and the quantisations the engines branch on.
SHAPES = [
    (8, 14336, 4096, 2, None, None),
    (8, 14336, 4096, 2, "fp8_w8a8", None),
    (128, 768, 2048, 8, None, None),
    (128, 768, 2048, 8, "fp8_w8a8", None),
    (256, 256, 7168, 8, "fp8_w8a8", [128, 128]),
    (128, 1536, 4096, 8, "fp8_w8a8", [128, 128]),
    (64, 1408, 2048, 6, None, None),
]
BATCH = list(range(1, 4097))
TABLE = {"1": {"BLOCK_SIZE_M": 16}, "3": {"BLOCK_SIZE_M": 32}, "64": {"BLOCK_SIZE_M": 64},
         "100": {"BLOCK_SIZE_M": 128}}  # ties at M=2 and M=82 go to the key first in the file


def functions(path: Path, names: list[str]) -> str:
    """The source of the named top-level functions of ``path``, decorators dropped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            out.append(ast.unparse(node))
    found = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} & set(names)
    missing = set(names) - found
    if missing:
        raise SystemExit(f"{path}: no function {', '.join(sorted(missing))}")
    return "\n\n".join(out)


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


def runs(values: dict[int, object]) -> list[list]:
    """{M: config} -> [[M_from, M_to, config], ...] over consecutive equal configs."""
    out: list[list] = []
    for m in sorted(values):
        if out and out[-1][2] == values[m] and out[-1][1] == m - 1:
            out[-1][1] = m
        else:
            out.append([m, m, values[m]])
    return out


def nearest(keys, m):
    """``min(configs.keys(), key=lambda x: abs(x - M))``, the rule both engines' callers use."""
    return min(keys, key=lambda x: abs(x - m))


# -- vLLM ---------------------------------------------------------------------------------------

def vllm_namespace(src: Path, device: str, package: Path, env: dict) -> dict:
    ns: dict = {"__name__": "engine_trace", "functools": functools, "json": json, "os": os, "re": re,
                "__file__": str(package / "fused_moe.py"), "logger": _Logger(), "Any": object}
    ns["envs"] = types.SimpleNamespace(VLLM_BATCH_INVARIANT=False,
                                       VLLM_TUNED_CONFIG_FOLDER=env.get("VLLM_TUNED_CONFIG_FOLDER"))
    ns["current_platform"] = types.SimpleNamespace(is_rocm=lambda: False, get_device_name=lambda i=0: device)
    exec(compile(functions(src / VLLM_NAME_FILE, ["get_device_name_as_file_name"]).replace(
        "from vllm.platforms import current_platform", "pass"), "platform_utils", "exec"), ns)
    exec(compile(functions(src / VLLM_FILE, ["get_config_file_name", "get_moe_configs", "get_default_config"]),
                 "fused_moe", "exec"), ns)
    return ns


def vllm_traces(src: Path, work: Path) -> dict:
    defaults = []
    pkg = work / "vllm-pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    ns = vllm_namespace(src, "NVIDIA GeForce RTX 4090", pkg, {})
    for E, N, K, topk, dtype, block in SHAPES:
        got = {m: ns["get_default_config"](m, E, N, K, topk, dtype, block) for m in BATCH}
        defaults.append({"E": E, "N": N, "K": K, "topk": topk, "dtype": dtype, "block_shape": block,
                         "device": "NVIDIA GeForce RTX 4090", "runs": runs(got)})
    lookups = []
    cases = [
        ("override folder first", "NVIDIA GeForce RTX 4090", ["override/{name}", "pkg/configs/{name}"], True),
        ("package folder when the override lacks the file", "NVIDIA GeForce RTX 4090", ["pkg/configs/{name}"], True),
        ("no file: the default config", "NVIDIA GeForce RTX 4090", [], True),
        ("unset override variable", "NVIDIA GeForce RTX 4090", ["override/{name}", "pkg/configs/{name}"], False),
        ("H200 NVL folds to NVIDIA_H200", "NVIDIA H200 NVL", ["pkg/configs/{name}"], False),
    ]
    for label, device, files, set_env in cases:
        for E, N, K, topk, dtype, block in (SHAPES[0], SHAPES[4]):
            case_dir = work / f"vllm-{len(lookups)}"
            env = {"VLLM_TUNED_CONFIG_FOLDER": str(case_dir / "override")} if set_env else {}
            ns = vllm_namespace(src, device, case_dir / "pkg", env)
            name = ns["get_config_file_name"](E, N, dtype, block)
            placed = [f.format(name=name) for f in files]
            for i, rel in enumerate(placed):
                p = case_dir / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(json.dumps(dict(TABLE, triton_version="3.4.0", **{"2048": {"BLOCK_SIZE_M": 8 + i}})))
            (case_dir / "override").mkdir(parents=True, exist_ok=True)
            block_n, block_k = (block or [0, 0])
            ns["get_moe_configs"].cache_clear() if hasattr(ns["get_moe_configs"], "cache_clear") else None
            configs = ns["get_moe_configs"](E, N, dtype, block_n, block_k)
            loaded = None
            if configs is not None:
                loaded = next(rel for rel in placed if (case_dir / rel).is_file()
                              and {int(k) for k in json.loads((case_dir / rel).read_text()) if k != "triton_version"}
                              == set(configs) and json.loads((case_dir / rel).read_text())["2048"] == configs[2048])
            picks = runs({m: nearest(configs.keys(), m) for m in BATCH}) if configs else None
            lookups.append({"case": label, "device": device, "E": E, "N": N, "dtype": dtype, "block_shape": block,
                            "files": placed, "env": sorted(env), "name": name, "loaded": loaded,
                            "keys": sorted(configs) if configs else None, "picks": picks})
    return {"defaults": defaults, "lookups": lookups}


# -- SGLang -------------------------------------------------------------------------------------

def sglang_namespace(src: Path, device: str, smem_optin: int, triton_version: str, package: Path) -> dict:
    ns: dict = {"__name__": "engine_trace", "functools": functools, "json": json, "os": os,
                "__file__": str(package / "fused_moe_triton_config.py"), "logger": _Logger(),
                "Any": object, "Dict": dict, "List": list, "Optional": object, "Tuple": tuple,
                "_is_hip": False, "_LOW_SMEM_FP8_DEFAULT_CUTOFF_BYTES": 128 * 1024,
                "get_device_name": lambda device_id=0: device,
                "triton": types.SimpleNamespace(__version__=triton_version),
                "get_exec": lambda: types.SimpleNamespace(
                    deterministic=types.SimpleNamespace(enable_deterministic_inference=False)),
                "_get_cuda_shared_memory_per_block_optin": lambda: smem_optin}
    exec(compile(functions(src / SGLANG_FILE, ["_use_low_smem_fp8_default", "get_config_file_name",
                                               "get_moe_configs", "get_default_config"]), "sglang_config", "exec"), ns)
    return ns


def sglang_traces(src: Path, work: Path) -> dict:
    defaults = []
    for device, smem in (("NVIDIA GeForce RTX 4090", 101376), ("NVIDIA H100 80GB HBM3", 232448)):
        ns = sglang_namespace(src, device, smem, "3.4.0", work / "sglang-pkg")
        for E, N, K, topk, dtype, block in SHAPES:
            got = {m: ns["get_default_config"](m, E, N, K, topk, dtype, False, block) for m in BATCH}
            defaults.append({"E": E, "N": N, "K": K, "topk": topk, "dtype": dtype, "block_shape": block,
                             "device": device, "smem_per_block_optin": smem, "runs": runs(got)})
    lookups = []
    cases = [
        ("installed Triton's folder", "3.4.0", ["pkg/configs/triton_3_4_0/{name}", "pkg/configs/triton_3_5_1/{name}"], False),
        ("newest other Triton folder", "3.4.0", ["pkg/configs/triton_3_2_0/{name}", "pkg/configs/triton_3_5_1/{name}"], False),
        ("override replaces the package folder", "3.4.0", ["pkg/configs/triton_3_4_0/{name}",
                                                           "override/configs/triton_3_3_1/{name}"], True),
        ("override without the file: default config", "3.4.0", ["pkg/configs/triton_3_4_0/{name}",
                                                                 "override/configs/triton_3_4_0/other.json"], True),
        ("override without configs/: FileNotFoundError", "3.4.0", ["pkg/configs/triton_3_4_0/{name}",
                                                                  "override/{name}"], True),
        ("local Triton build matches no folder", "3.4.0+git1234", ["pkg/configs/triton_3_4_0/{name}"], False),
    ]
    for label, triton_version, files, set_env in cases:
        for E, N, K, topk, dtype, block in (SHAPES[0], SHAPES[4]):
            case_dir = work / f"sglang-{len(lookups)}"
            ns = sglang_namespace(src, "NVIDIA GeForce RTX 4090", 101376, triton_version, case_dir / "pkg")
            name = ns["get_config_file_name"](E, N, dtype, block or [0, 0])
            placed = [f.format(name=name) for f in files]
            for i, rel in enumerate(placed):
                p = case_dir / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(json.dumps(dict(TABLE, **{"2048": {"BLOCK_SIZE_M": 8 + i}})))
            (case_dir / "pkg").mkdir(parents=True, exist_ok=True)
            old = os.environ.get("SGLANG_MOE_CONFIG_DIR")
            if set_env:
                os.environ["SGLANG_MOE_CONFIG_DIR"] = str(case_dir / "override")
            else:
                os.environ.pop("SGLANG_MOE_CONFIG_DIR", None)
            error = None
            configs = None
            try:
                block_n, block_k = (block or [0, 0])
                configs = ns["get_moe_configs"](E, N, dtype, block_n, block_k)
            except Exception as exc:  # noqa: BLE001 - recorded: the engine's own failure
                error = type(exc).__name__
            finally:
                if old is None:
                    os.environ.pop("SGLANG_MOE_CONFIG_DIR", None)
                else:
                    os.environ["SGLANG_MOE_CONFIG_DIR"] = old
            loaded = None
            if configs is not None:
                loaded = next(rel for rel in placed if (case_dir / rel).is_file()
                              and json.loads((case_dir / rel).read_text())["2048"] == configs[2048])
            picks = runs({m: nearest(configs.keys(), m) for m in BATCH}) if configs else None
            lookups.append({"case": label, "device": "NVIDIA GeForce RTX 4090", "triton_version": triton_version,
                            "E": E, "N": N, "dtype": dtype, "block_shape": block, "files": placed,
                            "env": ["SGLANG_MOE_CONFIG_DIR"] if set_env else [], "name": name, "loaded": loaded,
                            "error": error, "keys": sorted(configs) if configs else None, "picks": picks})
    return {"defaults": defaults, "lookups": lookups}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="/work/engines/src", help="folder with vllm-<v>/ and sglang-<v>/ source trees")
    ap.add_argument("--vllm", default="vllm-0.33.0")
    ap.add_argument("--sglang", default="sglang-0.5.23")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "data" / "engine_traces"))
    args = ap.parse_args()
    src = Path(args.src)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    stubs = {
        "vllm": "envs.VLLM_BATCH_INVARIANT=False, envs.VLLM_TUNED_CONFIG_FOLDER from the case, "
                "current_platform.is_rocm()=False, current_platform.get_device_name() = the case's GPU name, "
                "__file__ in the case's package folder, logger silenced",
        "sglang": "get_exec().deterministic.enable_deterministic_inference=False, _is_hip=False, "
                  "get_device_name() = the case's GPU name, the GPU's shared_memory_per_block_optin, "
                  "triton.__version__ from the case, __file__ in the case's package folder, logger silenced",
    }
    with tempfile.TemporaryDirectory() as tmp:
        for engine, version_dir, files, record in (
                ("vllm", args.vllm, [VLLM_FILE, VLLM_NAME_FILE], vllm_traces),
                ("sglang", args.sglang, [SGLANG_FILE], sglang_traces)):
            root = src / version_dir
            data = record(root, Path(tmp) / engine)
            doc = {"format": 1, "provenance": {
                "engine": engine, "version": version_dir.split("-", 1)[1],
                "recorded_by": "bench/engine_traces.py", "date": today,
                "how": "the engine's functions taken from its source by AST and run with exec on fixtures; "
                       "only their results are stored",
                "sources": {f: sha256(root / f) for f in files}, "stand_ins": stubs[engine],
                "batch_sizes": f"{BATCH[0]}-{BATCH[-1]}"}, **data}
            path = out / f"{version_dir}.json"
            path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
            print(f"wrote {path}: {len(data['defaults'])} default cases, {len(data['lookups'])} lookups "
                  f"({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
