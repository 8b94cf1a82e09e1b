"""Which config file an engine will load: the name it builds, the folders it searches, the entry
it picks for a batch size.

Folders come from three places, in this order of trust:

* ``--engine-path`` (or an installed engine of the profile's version, found without importing
  it): the real package folder on disk;
* the bundled index of the files the release ships (:mod:`tilefit.doctor.shipped`);
* the user's override folders (``$SGLANG_MOE_CONFIG_DIR``, ``$VLLM_TUNED_CONFIG_FOLDER``), always
  on disk.

Lookup order (engines.md section 3): vLLM fused MoE tries ``$VLLM_TUNED_CONFIG_FOLDER/<name>``
then the package folder; SGLang fused MoE uses ``$SGLANG_MOE_CONFIG_DIR`` *instead of* the package
folder, tries ``configs/triton_<installed>/<name>``, then every other ``triton_*`` folder newest
first; for the down GEMM it first looks for ``<name>_down`` that way and falls back to the up
table. Block-GEMM tables are read from the package folder only. An entry is chosen by the
smallest ``|key - M|``, ties to the key that comes first in the file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from tilefit.serving.profiles import Profile

from .shipped import ShippedIndex, load_index

_TRITON_DIR = re.compile(r"^triton_(\d+)_(\d+)_(\d+)$")


# --------------------------------------------------------------------------------------------
# names (the file names themselves: tilefit.serving.naming)


def triton_folder_name(version: str) -> str | None:
    """``3.4.0`` -> ``triton_3_4_0``; a local version (``3.4.0+git...``) matches no folder."""
    v = version.strip()
    if "+" in v or not re.fullmatch(r"\d+\.\d+(\.\d+)?", v):
        return None
    parts = v.split(".")
    if len(parts) == 2:
        parts.append("0")
    return "triton_" + "_".join(parts)


def _folder_version(name: str) -> tuple[int, ...] | None:
    m = _TRITON_DIR.match(name)
    return tuple(int(x) for x in m.groups()) if m else None


# --------------------------------------------------------------------------------------------
# where files live


class Place:
    """A folder the engine reads: on disk, or a folder of the bundled index."""

    def __init__(self, label: str, disk: Path | None = None, index: ShippedIndex | None = None,
                 index_dir: str | None = None):
        self.label = label
        self.disk = disk
        self.index = index
        self.index_dir = index_dir

    def child(self, name: str) -> "Place":
        if self.disk is not None:
            return Place(f"{self.label}/{name}", disk=self.disk / name)
        return Place(f"{self.label}/{name}", index=self.index, index_dir=f"{self.index_dir}/{name}")

    def exists(self) -> bool:
        if self.disk is not None:
            return self.disk.is_dir()
        return self.index is not None and any(
            f == self.index_dir or f.startswith(self.index_dir + "/") for f in self.index.folders)

    def subfolders(self) -> list[str]:
        if self.disk is not None:
            try:
                return sorted(p.name for p in self.disk.iterdir() if p.is_dir())
            except OSError:
                return []
        prefix = self.index_dir + "/"
        return sorted({f[len(prefix):].split("/")[0] for f in self.index.folders if f.startswith(prefix)})

    def has(self, name: str) -> bool:
        if self.disk is not None:
            return (self.disk / name).is_file()
        return self.index.has(self.index_dir, name)

    def path_of(self, name: str) -> str:
        if self.disk is not None:
            return str(self.disk / name)
        return f"{self.label}/{name}"

    def load(self, name: str) -> Any:
        """The file's JSON (raises ValueError for unreadable or invalid files)."""
        if self.disk is not None:
            path = self.disk / name
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
            except ValueError as exc:
                raise ValueError(f"{path} is not valid JSON: {exc}") from None
        return self.index.table(self.index_dir, name)


@dataclass
class PackageSource:
    """Where the engine's package folders come from."""

    kind: str  # "path" (--engine-path / installed engine), "index" (bundled), "none"
    label: str
    root: Path | None = None  # folder holding the top-level package (site-packages style)
    index: ShippedIndex | None = None

    def place(self, package_dir: str, alternatives: Sequence[str] = ()) -> Place | None:
        """The folder; on disk, the first of ``package_dir`` and its ``alternatives`` (the layouts
        of other releases) that exists."""
        if self.kind == "path" and self.root is not None:
            for rel in (package_dir, *alternatives):
                if (self.root / rel).is_dir():
                    return Place(str(self.root / rel), disk=self.root / rel)
            return Place(str(self.root / package_dir), disk=self.root / package_dir)
        if self.kind == "index" and self.index is not None:
            return Place(f"<{self.label}>/{package_dir}", index=self.index, index_dir=package_dir)
        return None


def package_root(engine: str, path: Path) -> Path | None:
    """The folder that holds ``<engine>/`` for an --engine-path that is that folder, the package
    folder itself, or a release folder laid out like the wheel."""
    if (path / engine).is_dir():
        return path
    if path.name == engine and path.is_dir():
        return path.parent
    return None


def dist_version(engine: str, root: Path) -> str | None:
    """The version in ``<root>/<engine>-X.Y.Z.dist-info`` (the wheel's metadata), if present."""
    for info in sorted(root.glob(f"{engine}-*.dist-info")):
        return info.name[len(engine) + 1: -len(".dist-info")]
    return None


def installed_engine(engine: str) -> tuple[Path, str] | None:
    """(site-packages folder, version) of an installed engine, found without importing it."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover
        return None
    try:
        dist = distribution(engine)
    except PackageNotFoundError:
        return None
    try:
        root = Path(dist.locate_file(""))
    except Exception:  # noqa: BLE001 - odd installers
        return None
    if not (root / engine).is_dir():
        return None
    return root, dist.version


def package_source(profile: Profile, engine_path: str | None, auto_detect: bool = True) -> PackageSource:
    if engine_path:
        root = package_root(profile.engine, Path(engine_path))
        if root is None:
            raise ValueError(f"--engine-path {engine_path}: no {profile.engine}/ package folder there")
        return PackageSource("path", f"{profile.engine} at {root / profile.engine}", root=root)
    if auto_detect:
        found = installed_engine(profile.engine)
        if found is not None and found[1] == profile.version:
            return PackageSource("path", f"installed {profile.engine} {found[1]} at {found[0] / profile.engine}",
                                 root=found[0])
    if profile.shipped_index:
        index = load_index(profile.shipped_index)
        return PackageSource("index", f"bundled index of {profile.engine} {index.version}", index=index)
    return PackageSource("none", f"no index of the files {profile.label} ships")


# --------------------------------------------------------------------------------------------
# the search


@dataclass
class Probe:
    where: str
    found: bool
    note: str = ""

    def to_json(self) -> dict:
        return {"where": self.where, "found": self.found, "note": self.note or None}


@dataclass
class Lookup:
    """The outcome of one lookup: which file (if any) the engine loads for one name."""

    name: str | None  # the file name asked for (None when the device has no name)
    probes: list[Probe] = field(default_factory=list)
    path: str | None = None  # the file loaded
    table: dict | None = None  # {int M: entry} in file order
    problem: str | None = None  # the engine fails while reading (a crash, not a fallback)
    via_down_fallback: bool = False

    @property
    def found(self) -> bool:
        return self.table is not None

    def to_json(self) -> dict:
        return {"name": self.name, "loaded": self.path, "probes": [p.to_json() for p in self.probes],
                "problem": self.problem, "keys": list(self.table) if self.table else None}


def parse_table(data: Any, engine: str, where: str) -> tuple[dict | None, str | None]:
    """The table as the engine holds it ({int M: entry}) or (None, why the engine fails)."""
    if not isinstance(data, dict):
        return None, f"{where}: top level is not an object; the engine fails to load it"
    out: dict[int, Any] = {}
    for key, value in data.items():
        if engine == "vllm" and key == "triton_version":
            continue
        try:
            m = int(key)
        except (TypeError, ValueError):
            return None, f"{where}: key {key!r} is not an integer; {engine} raises ValueError while loading it"
        out[m] = value  # a repeated key keeps its first position and its last value, as in a dict
    if not out:
        return None, f"{where}: no batch-size entries"
    return out, None


def nearest_key(keys: Sequence[int], m: int) -> int:
    """The engines' ``min(keys, key=lambda k: abs(k - M))``: ties go to the earlier key."""
    best = None
    for k in keys:
        if best is None or abs(k - m) < abs(best - m):
            best = k
    assert best is not None
    return best


def _load_into(result: Lookup, place: Place, name: str, engine: str) -> None:
    result.path = place.path_of(name)
    try:
        data = place.load(name)
    except ValueError as exc:
        result.problem = f"{exc}; the engine fails while loading it"
        return
    table, problem = parse_table(data, engine, result.path)
    result.table, result.problem = table, problem


def search_moe(profile: Profile, name: str, source: PackageSource, env: Mapping[str, str],
               triton_version: str | None) -> Lookup:
    """Search for one fused-MoE table name the way ``profile``'s engine does."""
    rules = profile.moe
    result = Lookup(name)
    env_var = rules.env
    override = env.get(env_var) if env_var else None
    if profile.engine == "vllm":
        places: list[Place] = []
        if override:
            places.append(Place(f"${env_var}={override}", disk=Path(override)))
        else:
            result.probes.append(Probe(f"${env_var}", False, "not set"))
        pkg = source.place(rules.package_dir, rules.get("package_dir_alternatives", ()))
        if pkg is not None:
            places.append(pkg)
        else:
            result.probes.append(Probe(f"package {rules.package_dir}", False, source.label))
        for place in places:
            if place.has(name):
                result.probes.append(Probe(place.path_of(name), True))
                _load_into(result, place, name, profile.engine)
                return result
            result.probes.append(Probe(place.path_of(name), False))
        return result

    # SGLang: one base folder (the override replaces the package), then triton_X_Y_Z folders.
    if override:
        base = Place(f"${env_var}={override}", disk=Path(override))
        result.probes.append(Probe(f"${env_var}={override} (replaces the package folder)", True))
    else:
        result.probes.append(Probe(f"${env_var}", False, "not set: the package folder is used"))
        base = source.place(rules.package_dir, rules.get("package_dir_alternatives", ()))
        if base is None:
            result.probes.append(Probe(f"package {rules.package_dir}", False, source.label))
            return result
    configs = base.child("configs")
    if not configs.exists():
        if override:
            result.problem = (f"${env_var}={override} has no configs/ folder: SGLang raises FileNotFoundError "
                              f"while listing configs/triton_* (before any kernel launches); put the tables in "
                              f"{override}/configs/triton_X_Y_Z/")
        result.probes.append(Probe(configs.label, False, "no configs/ folder"))
        return result
    exact_dir = triton_folder_name(triton_version) if triton_version else None
    if exact_dir:
        place = configs.child(exact_dir)
        # the version is the installed one, --triton-version's or the profile's (the header says which)
        why = f"the folder of Triton {triton_version}"
        if place.has(name):
            result.probes.append(Probe(place.path_of(name), True, why))
            _load_into(result, place, name, profile.engine)
            return result
        result.probes.append(Probe(place.path_of(name), False, why))
    elif triton_version:
        result.probes.append(Probe(f"{configs.label}/triton_?", False,
                                   f"Triton {triton_version} is a local build: no folder matches it"))
    folders = [f for f in configs.subfolders() if _folder_version(f) is not None and f != exact_dir]
    folders.sort(key=lambda f: _folder_version(f), reverse=True)
    for folder in folders:
        place = configs.child(folder)
        if place.has(name):
            result.probes.append(Probe(place.path_of(name), True,
                                       "fallback: newest other Triton folder with this file (SGLang logs it as sub-optimal)"))
            _load_into(result, place, name, profile.engine)
            return result
    if folders:
        result.probes.append(Probe(f"{configs.label}/{{{','.join(folders)}}}/{name}", False, "fallback folders"))
    return result


def search_gemm(profile: Profile, name: str, source: PackageSource) -> Lookup:
    rules = profile.block_gemm
    result = Lookup(name)
    place = source.place(rules.package_dir, rules.get("package_dir_alternatives", ()))
    if place is None:
        result.probes.append(Probe(f"package {rules.package_dir}", False, source.label))
        return result
    if place.has(name):
        result.probes.append(Probe(place.path_of(name), True, "package folder (no override folder exists)"))
        _load_into(result, place, name, profile.engine)
    else:
        result.probes.append(Probe(place.path_of(name), False, "package folder (no override folder exists)"))
    return result
