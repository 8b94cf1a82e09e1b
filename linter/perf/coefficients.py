"""Coefficients of the performance model, as data.

Files live in ``tilefit/data/perf_model/`` (bundled), in the user data folder where ``tilefit
calibrate perf`` writes (``perf_model`` in the user data folder, :mod:`tilefit.userdata`), and in any folder
or file named by ``$TILEFIT_PERF_MODEL_PATH`` (``os.pathsep``-separated) or passed to
:func:`load_coefficients`.
A file is recognised by its ``kind``, not its name; ``tilefit calibrate perf`` writes
``device-<key>.json`` files with :func:`write_coefficients`.

File format (``format`` 1)::

    {
      "format": 1,
      "kind": "perf_coefficients",
      "applies_to": {},                       # {} defaults, {"arch": "sm_89"}, {"device": "h200"}
      "provenance": {"method": "...", "date": "YYYY-MM-DD", "tool": "...", "measurements": 0,
                     "device_name": "...", "triton_version": "..."},
      "coefficients": {"mma_efficiency": 0.6, ...},   # a subset is fine: it overrides the layers below
      "sources": {"mma_efficiency": "why this value"}  # optional, per coefficient
    }

Layers, later wins: bundled defaults < ``arch`` files < ``device`` files; within a layer user
files win over bundled ones. Unknown coefficient names are an error (a typo must not silently
keep a default).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Mapping

from tilefit.atomicfile import write_atomic
from tilefit.readfile import read_bytes

FORMAT = 1
KIND = "perf_coefficients"
ENV_VAR = "TILEFIT_PERF_MODEL_PATH"


class CoefficientError(ValueError):
    """A coefficient file is malformed."""


@dataclass(frozen=True)
class CoefficientFile:
    source: str
    applies_to: Mapping[str, str]
    values: Mapping[str, float]
    provenance: Mapping[str, object]

    @property
    def layer(self) -> int:
        if "device" in self.applies_to:
            return 2
        if "arch" in self.applies_to:
            return 1
        return 0

    def matches(self, device) -> bool:
        want = self.applies_to
        if "device" in want and (device is None or want["device"] != device.key):
            return False
        if "arch" in want and (device is None or want["arch"] != device.arch):
            return False
        return True


@dataclass(frozen=True)
class Coefficients:
    """The merged coefficients for one device, with where each value came from."""

    values: Mapping[str, float]
    origin: Mapping[str, str] = field(default_factory=dict)  # name -> file that set it

    def __getitem__(self, name: str) -> float:
        return self.values[name]

    def get(self, name: str, default: float | None = None) -> float | None:
        return self.values.get(name, default)

    def with_(self, **changes: float) -> "Coefficients":
        unknown = set(changes) - set(self.values)
        if unknown:
            raise CoefficientError(f"unknown coefficients: {', '.join(sorted(unknown))}")
        values = dict(self.values)
        values.update(changes)
        origin = dict(self.origin)
        origin.update({k: "<override>" for k in changes})
        return Coefficients(values, origin)


def parse_file(data: Mapping, source: str) -> CoefficientFile:
    if not isinstance(data, Mapping):
        raise CoefficientError(f"{source}: expected a JSON object")
    if data.get("format") != FORMAT:
        raise CoefficientError(f"{source}: unsupported format {data.get('format')!r} (expected {FORMAT})")
    applies = data.get("applies_to", {})
    if not isinstance(applies, Mapping) or set(applies) - {"device", "arch"}:
        raise CoefficientError(f"{source}: applies_to must be {{}}, {{'arch': ...}} or {{'device': ...}}")
    values = data.get("coefficients")
    if not isinstance(values, Mapping) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.values()):
        raise CoefficientError(f"{source}: coefficients must map names to numbers")
    provenance = data.get("provenance")
    if not isinstance(provenance, Mapping) or "method" not in provenance:
        raise CoefficientError(f"{source}: provenance with at least a 'method' is required")
    return CoefficientFile(source, dict(applies), {k: float(v) for k, v in values.items()}, dict(provenance))


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(read_bytes(path).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        reason = "nesting too deep" if isinstance(exc, RecursionError) else (getattr(exc, "strerror", None) or exc)
        raise CoefficientError(f"cannot read {path}: {reason}") from None
    return data if isinstance(data, dict) and data.get("kind") == KIND else None


def _bundled() -> list[CoefficientFile]:
    folder = resources.files("tilefit") / "data" / "perf_model"
    out = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        data = json.loads(entry.read_text())
        if isinstance(data, dict) and data.get("kind") == KIND:
            out.append(parse_file(data, f"tilefit/data/perf_model/{entry.name}"))
    return out


def user_folder() -> Path | None:
    """Where ``tilefit calibrate perf`` writes by default (read automatically): ``perf_model``
    in the user data folder (:mod:`tilefit.userdata`); None when that is turned off."""
    from tilefit.userdata import PERF_MODEL, model_folder

    return model_folder(PERF_MODEL)


def _user_paths(extra: Iterable[str | os.PathLike], env: str = "") -> list[Path]:
    """The user's coefficient files: the user folder, ``$TILEFIT_PERF_MODEL`` (``env``) and
    ``extra``. Only what is named is read: an empty name is no folder (it once read the current
    folder's ``*.json``)."""
    paths = [Path(p) for p in env.split(os.pathsep) if p.strip()]
    folder = user_folder()
    if folder is not None and folder.is_dir() and not os.environ.get("TILEFIT_ISOLATED_PERF"):
        paths.insert(0, folder)
    paths += [Path(p) for p in extra if str(p).strip()]
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(p.glob("*.json")))
        elif p.is_file():
            files.append(p)
    return files


@lru_cache(maxsize=None)
def _files(extra: tuple[str, ...], env: str = "") -> tuple[CoefficientFile, ...]:
    files = _bundled()
    defaults = [f for f in files if f.layer == 0]
    if not defaults:
        raise CoefficientError("no default perf-model coefficients are installed")
    for path in _user_paths(extra, env):
        data = _read(path)
        if data is not None:
            files.append(parse_file(data, str(path)))
    known = set(defaults[0].values)
    for f in files:
        unknown = set(f.values) - known
        if unknown:
            raise CoefficientError(f"{f.source}: unknown coefficients {', '.join(sorted(unknown))}")
    return tuple(files)


_MERGED: dict[tuple, tuple] = {}  # (id of _files' answer, device key, arch) -> (that answer, Coefficients)


def load_coefficients(device=None, extra_files: Iterable[str | os.PathLike] = ()) -> Coefficients:
    """The coefficients for ``device`` (a ``device_db.Device``; None: the defaults).

    Memoised on the files read (:func:`_files`' answer, held so its id is not reused) and the two
    facts a file matches on (the device's key and arch): one merged object per device while the
    files stay, so the model's per-device memos (keyed on the coefficients' identity) hit when a
    caller passes none (``predict(config, shape, device)``)."""
    files = _files(tuple(str(p) for p in extra_files), os.environ.get(ENV_VAR, ""))
    key = (id(files), None if device is None else (device.key, getattr(device, "arch", None)))
    hit = _MERGED.get(key)
    if hit is not None and hit[0] is files:
        return hit[1]
    merged = _merge(files, device)
    if len(_MERGED) > 1024:
        _MERGED.clear()
    _MERGED[key] = (files, merged)
    return merged


def _merge(files: tuple[CoefficientFile, ...], device) -> Coefficients:
    values: dict[str, float] = {}
    origin: dict[str, str] = {}
    # stable sort: layer order, and within a layer bundled before user files
    for f in sorted(files, key=lambda f: f.layer):
        if f.matches(device):
            for k, v in f.values.items():
                values[k] = v
                origin[k] = f.source
    return Coefficients(values, origin)


def coefficient_files(extra_files: Iterable[str | os.PathLike] = ()) -> tuple[CoefficientFile, ...]:
    """Every coefficient file the loader sees (for ``tilefit calibrate perf --show``)."""
    return _files(tuple(str(p) for p in extra_files), os.environ.get(ENV_VAR, ""))


def write_coefficients(path: str | os.PathLike, values: Mapping[str, float], provenance: Mapping[str, object], *,
                       device: str | None = None, arch: str | None = None,
                       sources: Mapping[str, str] | None = None) -> Path:
    """Write a coefficient file (what ``tilefit calibrate perf`` produces); validated on the way."""
    applies: dict[str, str] = {}
    if device is not None:
        applies["device"] = device
    if arch is not None:
        applies["arch"] = arch
    data = {"format": FORMAT, "kind": KIND, "applies_to": applies, "provenance": dict(provenance),
            "coefficients": {k: float(v) for k, v in values.items()}}
    if sources:
        data["sources"] = dict(sources)
    parse_file(data, str(path))
    known = set(load_coefficients().values)
    unknown = set(values) - known
    if unknown:
        raise CoefficientError(f"unknown coefficients {', '.join(sorted(unknown))}")
    p = Path(path)
    write_atomic(p, json.dumps(data, indent=2) + "\n")
    _files.cache_clear()
    return p
