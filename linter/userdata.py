"""The user data folder: where ``tilefit calibrate smem`` and ``tilefit calibrate perf`` write
their models by default, and where the model loaders look before the bundled files.

``$TILEFIT_DATA_DIR`` (an empty value turns the folder off: nothing is read from it, and the
calibrations then need ``--out``), else ``platformdirs.user_data_dir("tilefit")`` (for example
``~/.local/share/tilefit`` on Linux). The installed package's own data folder is never written:
it may be read-only, and a reinstall would silently drop a calibration.

* ``smem_model/triton-<major>.<minor>.json``: an analytic shared-memory model
  (:mod:`tilefit.smem.analytic`); it replaces the bundled one of the same Triton release.
* ``perf_model/*.json``: performance-model coefficients (:mod:`tilefit.perf.coefficients`).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "TILEFIT_DATA_DIR"
SMEM_MODEL = "smem_model"
PERF_MODEL = "perf_model"


def data_root() -> Path | None:
    """The user data folder, or None when ``$TILEFIT_DATA_DIR`` is set empty. Remembered per
    value of the variables it is read from (a cold check asks hundreds of times, and
    ``platformdirs`` builds the path anew each time)."""
    env = os.environ.get(ENV_VAR)
    key = (env, os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME"))
    hit = _ROOTS.get(key, _MISSING)
    if hit is not _MISSING:
        return hit
    root = _ROOTS[key] = _data_root(env)
    return root


_ROOTS: dict[tuple, Path | None] = {}
_MISSING = object()


def _data_root(env: str | None) -> Path | None:
    if env is not None:
        return Path(env).expanduser() if env.strip() else None
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        return None
    return Path(platformdirs.user_data_dir("tilefit"))


def model_folder(kind: str) -> Path | None:
    """``<data root>/<kind>`` (``smem_model``, ``perf_model``), or None without a data root."""
    root = data_root()
    return root / kind if root is not None else None


def fingerprint() -> list:
    """Name, size and modification time of every model file in the user data folder: what the
    result cache's run key adds, so a new calibration re-checks every file."""
    out = []
    for kind in (SMEM_MODEL, PERF_MODEL):
        folder = model_folder(kind)
        if folder is None:
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".json"):
                try:
                    st = os.stat(folder / name)
                except OSError:
                    continue
                out.append([kind, name, st.st_size, st.st_mtime_ns])
    return out
