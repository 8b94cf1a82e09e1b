"""Which tuning tables an engine release ships, and what is in them, as bundled data.

``tilefit doctor`` must know whether the engine will find a file for the user's model and GPU
without the engine being installed. The index of a release (``data/engine_profiles/
<engine>-<version>.shipped.json``) lists, per package folder, every fused-MoE and block-GEMM
table with its batch keys (in file order) and entries. Entries are deduplicated: a table is a
list of indexes into a shared list of configs, and each config a list of values whose keys are
one of a few shared key lists, so the 1152 tables of SGLang 0.5.23 and vLLM 0.33.0 take a few
hundred kilobytes.

Regenerate from the corpus (the wheels' files, byte for byte) with::

    python -m tilefit.doctor.shipped /path/to/shared/corpus

Layout of an index file::

    {"format": 1, "engine": "sglang", "version": "0.5.23", "source": "...",
     "key_sets": [["BLOCK_SIZE_M", ...], ...],          # parameter names of configs
     "configs": [[key_set, v1, v2, ...], ...],           # distinct entries
     "batch_keys": [["1", "2", ...], ...],               # distinct top-level key lists
     "dirs": {"<folder inside the wheel>": {"<file name>": [batch_keys, [value, ...]]}}}

A table's value list holds, per top-level key, a config index (an int) or ``[literal]`` for a
value that is no object (``null`` entries, ``"triton_version"``).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

FORMAT = 1

# Folders (inside the wheel) whose tables the doctor resolves, per engine. A trailing "/*"
# means every sub-folder (SGLang's triton_X_Y_Z).
TABLE_DIRS = {
    "sglang": ("sglang/srt/layers/moe/moe_runner/triton_utils/configs/*", "sglang/kernels/ops/gemm/configs"),
    "vllm": ("vllm/model_executor/layers/fused_moe/configs", "vllm/model_executor/layers/quantization/utils/configs"),
}


class ShippedIndex:
    """The tables one engine release ships: ``lookup(folder, name)`` -> the parsed table or None."""

    def __init__(self, data: Mapping, source: str = "<memory>"):
        if data.get("format") != FORMAT:
            raise ValueError(f"{source}: unsupported shipped-index format {data.get('format')!r}")
        self.source = source
        self.engine: str = data["engine"]
        self.version: str = data["version"]
        self._key_sets = data["key_sets"]
        self._configs = data["configs"]
        self._batch_keys = data["batch_keys"]
        self._dirs: Mapping[str, Mapping[str, list]] = data["dirs"]

    @property
    def folders(self) -> list[str]:
        return list(self._dirs)

    def names(self, folder: str) -> list[str]:
        return list(self._dirs.get(folder, {}))

    def has(self, folder: str, name: str) -> bool:
        return name in self._dirs.get(folder, {})

    def table(self, folder: str, name: str) -> dict[str, Any] | None:
        """The table as ``json.load`` would return it (key order kept), or None."""
        row = self._dirs.get(folder, {}).get(name)
        if row is None:
            return None
        keys = self._batch_keys[row[0]]
        out: dict[str, Any] = {}
        for key, value in zip(keys, row[1]):
            if isinstance(value, list):
                out[key] = value[0]
            else:
                cfg = self._configs[value]
                out[key] = dict(zip(self._key_sets[cfg[0]], cfg[1:]))
        return out


@lru_cache(maxsize=None)
def load_index(file_name: str) -> ShippedIndex:
    entry = resources.files("tilefit") / "data" / "engine_profiles" / file_name
    try:
        data = json.loads(entry.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the shipped-table index {file_name}: {exc}") from None
    return ShippedIndex(data, f"tilefit/data/engine_profiles/{file_name}")


def _folders(release: Path, engine: str) -> list[Path]:
    out = []
    for pattern in TABLE_DIRS[engine]:
        if pattern.endswith("/*"):
            base = release / pattern[:-2]
            out.extend(sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else [])
        else:
            out.append(release / pattern)
    return [p for p in out if p.is_dir()]


def build_index(release: Path, engine: str, version: str, source: str) -> dict:
    """Index every table of ``release`` (a folder laid out like the wheel)."""
    key_sets: dict[tuple, int] = {}
    configs: dict[tuple, int] = {}
    batch_keys: dict[tuple, int] = {}
    dirs: dict[str, dict[str, list]] = {}
    for folder in _folders(release, engine):
        rel = folder.relative_to(release).as_posix()
        tables: dict[str, list] = {}
        for path in sorted(folder.glob("*.json")):
            if "=" not in path.name:
                continue
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                continue
            values = []
            for value in data.values():
                if isinstance(value, dict):
                    ks = key_sets.setdefault(tuple(value), len(key_sets))
                    cfg = (ks, *value.values())
                    values.append(configs.setdefault(cfg, len(configs)))
                else:
                    values.append([value])
            bk = batch_keys.setdefault(tuple(data), len(batch_keys))
            tables[path.name] = [bk, values]
        dirs[rel] = tables
    return {
        "format": FORMAT,
        "engine": engine,
        "version": version,
        "source": source,
        "key_sets": [list(k) for k in key_sets],
        "configs": [list(c) for c in configs],
        "batch_keys": [list(k) for k in batch_keys],
        "dirs": dirs,
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m tilefit.doctor.shipped CORPUS_DIR  (holding sglang-X.Y.Z/ and vllm-X.Y.Z/)",
              file=sys.stderr)
        return 2
    corpus = Path(argv[0])
    out_dir = Path(__file__).resolve().parents[1] / "data" / "engine_profiles"
    for release in sorted(corpus.iterdir()):
        if not release.is_dir() or "-" not in release.name:
            continue
        engine, version = release.name.split("-", 1)
        if engine not in TABLE_DIRS:
            continue
        index = build_index(release, engine, version,
                            f"shared/corpus/{release.name} (files of the PyPI wheel, checked against its RECORD)")
        target = out_dir / f"{engine}-{version}.shipped.json"
        target.write_text(json.dumps(index, separators=(",", ":")) + "\n")
        n = sum(len(t) for t in index["dirs"].values())
        print(f"{target}: {n} tables, {len(index['configs'])} distinct entries, {target.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
