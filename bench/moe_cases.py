"""The fused-MoE shapes the perf model is fitted on and scored on, and what is measured for each.

Four gate/up GEMMs from the corpus's tables (sizes from ``tilefit/data/perf_model/
model_shapes.json``), chosen to differ where the model's terms differ:

| case | table | E | GEMM N (2 x N) | K | top_k | dtypes |
|---|---|---:|---:|---:|---:|---|
| qwen3-30b-a3b | E=128,N=768 | 128 | 1536 | 2048 | 8 | bf16, fp8_w8a8 |
| mixtral-8x7b (few experts, large N) | E=8,N=14336 | 8 | 28672 | 4096 | 2 | bf16, fp8_w8a8 |
| qwen3-next-80b-a3b (many small experts) | E=512,N=128 | 512 | 256 | 2048 | 10 | bf16, fp8_w8a8 |
| deepseek-v3 (block FP8) | E=256,N=256 | 256 | 512 | 7168 | 8 | fp8_w8a8 block [128, 128] |

Batch sizes 1, 16, 64, 256, 1024, 4096. The starting table of each (case, dtype) is an H200
table as a user would copy it to an RTX 4090: at each batch size the corpus's own vLLM H200
entry where it needs more than the RTX 4090's 101376 bytes, else an entry that does (SGLang's old
default tile, 128x256 with 4 stages); ``start_entries`` says which.

``candidates(combo)`` is the engines' CUDA tuning grid (BM 16-256, BN 32-256, BK 64-256, warps
4/8, stages 2-5; block FP8: BK 64/128, as vLLM clamps BK to the block) at GROUP_SIZE_M 1,
restricted to configs that fit both the H200 and the RTX 4090 by the fixer's own fit test
(:meth:`tilefit.fix.planner.FixPlanner.fits`, analytic estimator: it agrees with Triton 3.6's
exact sm_89 figures on all 882 grid tiles of the Qwen3 case).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MS = (1, 16, 64, 256, 1024, 4096)
CORPUS = Path(os.environ.get("TILEFIT_CORPUS", "/work/shared/corpus"))
VLLM_CONFIGS = CORPUS / "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs"
LIMIT_4090 = 101376
TARGET = "rtx4090"
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
SYNTHETIC = {  # needs 147456 B or more on sm_89
    "bf16": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 8,
             "num_stages": 4},
    "fp8_w8a8": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
                 "num_warps": 8, "num_stages": 4},
}


@dataclass(frozen=True)
class Case:
    name: str
    E: int
    N: int  # the table's N (intermediate size of one shard)
    K: int  # hidden size
    top_k: int
    dtypes: tuple[str, ...]
    block_shape: tuple[int, int] | None = None


CASES = (
    Case("qwen3-30b-a3b", 128, 768, 2048, 8, ("bf16", "fp8_w8a8")),
    Case("mixtral-8x7b", 8, 14336, 4096, 2, ("bf16", "fp8_w8a8")),
    Case("qwen3-next-80b-a3b", 512, 128, 2048, 10, ("bf16", "fp8_w8a8")),
    Case("deepseek-v3", 256, 256, 7168, 8, ("fp8_w8a8",), (128, 128)),
)


@dataclass(frozen=True)
class Combo:
    case: Case
    dtype: str

    @property
    def name(self) -> str:
        return f"{self.case.name}/{self.dtype}" + ("-block" if self.case.block_shape else "")

    @property
    def file_name(self) -> str:
        c = self.case
        name = f"E={c.E},N={c.N},device_name=NVIDIA_H200"
        if self.dtype != "bf16":
            name += f",dtype={self.dtype}"
        if c.block_shape:
            name += f",block_shape=[{c.block_shape[0]},{c.block_shape[1]}]"
        return name + ".json"

    @property
    def quant(self) -> str:
        if self.dtype == "bf16":
            return "none"
        return "block" if self.case.block_shape else "per_tensor"

    def moe_shape(self):
        from tilefit.tune.workload import MoEShape

        c = self.case
        return MoEShape(c.E, 2 * c.N, c.K, c.top_k, self.dtype, self.quant, c.block_shape)

    def gemm_shape(self, M: int):
        from tilefit.perf.shapes import GemmShape

        c = self.case
        return GemmShape("fused_moe", self.dtype, M, n=2 * c.N, k=c.K, experts=c.E, top_k=c.top_k, a_rows_unique=M,
                         block_shape=c.block_shape, engine="vllm", model=c.name)

    def as_json(self) -> dict:
        s = self.moe_shape()
        return {"name": self.name, "case": self.case.name, "dtype": self.dtype, "file_name": self.file_name,
                "shape": {"E": s.E, "N": s.N, "K": s.K, "top_k": s.top_k, "dtype": s.dtype, "quant": s.quant,
                          "block_shape": list(s.block_shape) if s.block_shape else None}}


def combos() -> list[Combo]:
    return [Combo(c, d) for c in CASES for d in c.dtypes]


def ckey(cfg) -> str:
    return "/".join(str(cfg.get(k)) for k in KEYS)


def norm(cfg) -> dict:
    out = {k: int(cfg[k]) for k in KEYS if k in cfg}
    out.setdefault("GROUP_SIZE_M", 1)
    return out


# -- the fixer's fit test -------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _planner():
    from tilefit.api import CheckOptions, build_engine
    from tilefit.config import Settings
    from tilefit.fix.planner import FixPlanner

    engine = build_engine(Settings(), CheckOptions(targets=[TARGET], estimator="analytic"))
    return FixPlanner(engine)


def table_path(combo: Combo, folder: str | Path, entries: dict | None = None) -> Path:
    """Write ``entries`` ({M: entry}; default: the start entries) as the combo's table."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / combo.file_name
    if entries is None:
        entries = {M: e for M, (e, _) in start_entries(combo).items()}
    path.write_text(json.dumps({str(M): e for M, e in entries.items()}, indent=4) + "\n")
    return path


@lru_cache(maxsize=None)
def _context(combo: Combo):
    from tilefit.tables import read_table

    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "tilefit_moe_cases" / "fit"
    path = table_path(combo, folder, {1: {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64,
                                          "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 2}})
    return _planner()._table_context(read_table(str(path)))


def fits(combo: Combo, cfg) -> bool:
    """Whether ``cfg`` fits the H200 and the RTX 4090 (the fixer's own test)."""
    return _planner().fits(_context(combo), cfg)


def grid_tiles(combo: Combo) -> list[dict]:
    bks = (64, 128) if combo.case.block_shape else (64, 128, 256)
    out = []
    for bm, bn, bk, w, s in itertools.product((16, 32, 64, 128, 256), (32, 64, 128, 256), bks, (4, 8),
                                              (2, 3, 4, 5)):
        cfg = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1, "num_warps": w,
               "num_stages": s}
        if fits(combo, cfg):
            out.append(cfg)
    return out


def corpus_table(combo: Combo) -> dict | None:
    path = VLLM_CONFIGS / combo.file_name
    if not path.is_file():
        return None
    return {k: v for k, v in json.loads(path.read_text()).items() if k.isdigit()}


def start_entries(combo: Combo) -> dict[int, tuple[dict, str]]:
    """{M: (entry, "corpus" or "synthetic")}: entries that do not fit the RTX 4090."""
    table = corpus_table(combo) or {}
    out = {}
    for M in MS:
        entry = table.get(str(M))
        if entry is not None and not fits(combo, entry):
            out[M] = (norm(entry), "corpus")
        else:
            syn = dict(SYNTHETIC[combo.dtype])
            assert not fits(combo, syn), (combo.name, syn)
            out[M] = (syn, "synthetic")
    return out


def vllm_default(combo: Combo, M: int) -> dict:
    from tilefit.fix.defaults import vllm_default_config

    c = combo.case
    return vllm_default_config(M, c.E, c.N, c.K, c.top_k, combo.dtype, c.block_shape)


def naive(combo: Combo, entry: dict) -> dict | None:
    from tilefit.fix.planner import naive_fix

    return naive_fix(entry, lambda e: fits(combo, e))


def fixer_picks(combo: Combo, folder: str | Path, unsafe: bool = True) -> dict[int, dict]:
    """The GPU-free fixer's choice at each batch size (``tilefit check --fix --unsafe-fixes
    --target rtx4090`` on the starting table, with the coefficients the process loads; ``unsafe``
    False: without ``--unsafe-fixes``, BLOCK_SIZE_K stays)."""
    from tilefit.app import compare_fixes

    path = table_path(combo, folder)
    return {row.M: norm(row.chosen) for row in compare_fixes(str(path), [TARGET], unsafe=unsafe)}


def sweep_plan(folder: str | Path) -> dict:
    """What the sweep measures: per combo the fitting grid tiles at every M, plus per M the
    starting entry (it runs on the H200), its naive fix, vLLM's default and the fixer's pick."""
    plan = {"Ms": list(MS), "target": TARGET, "combos": []}
    for combo in combos():
        starts = start_entries(combo)
        picks = fixer_picks(combo, folder)
        extras = {}
        for M in MS:
            start, source = starts[M]
            roles = {"start": start, "vllm_default": vllm_default(combo, M)}
            nv = naive(combo, start)
            if nv is not None:
                roles["naive"] = norm(nv)
            if M in picks:
                roles["fixer_before"] = picks[M]
            extras[str(M)] = {"roles": roles, "start_source": source}
        plan["combos"].append({**combo.as_json(), "tiles": grid_tiles(combo), "extras": extras})
    return plan


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", help="write the sweep plan (JSON) here")
    ap.add_argument("--tables", default="/tmp/tilefit_moe_cases/tables")
    args = ap.parse_args()
    plan = sweep_plan(args.tables)
    for c in plan["combos"]:
        srcs = sorted({v["start_source"] for v in c["extras"].values()})
        print(f"{c['name']:34s} {len(c['tiles']):4d} fitting tiles; starts: {', '.join(srcs)}")
    if args.plan:
        Path(args.plan).write_text(json.dumps(plan, indent=1))
