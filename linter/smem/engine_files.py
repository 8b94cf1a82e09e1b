"""Where an engine calibration's files live: the user data folder first, then the package.

``tilefit calibrate smem --engine`` writes, like plain ``calibrate smem``, to the user data folder
(:mod:`tilefit.userdata`: ``<data root>/engine_smem/<kernel>/<engine>-<version>/``); the bundled
data of the package (``kernels/<kernel>/smem/<engine>-<version>/``) only with ``--package`` (a
developer's checkout: the installed package may be read-only, and a reinstall would silently
drop a calibration). Each folder holds, per Triton release ``X.Y``::

    triton-X.Y.json          forms, proofs, failures, provenance
    points-triton-X.Y.json   every compiled point

Readers (the engine model, ``--extend``, ``--probe-from``, ``--candidates``, the refit) take each
release's files from the user data folder when it has them, else from the package: a user's
calibration of a release replaces the bundled one of that release, the others stay. Nothing here
imports triton.
"""

from __future__ import annotations

from pathlib import Path

from .. import versions
from ..kernels import registry

ENGINE_SMEM = "engine_smem"


class EngineFilesError(ValueError):
    """The calibration cannot be written where asked."""


def package_dir(kernel: str, engine: str, version: str) -> Path:
    return Path(registry.get(kernel).folder) / "smem" / f"{engine}-{version}"


def user_dir(kernel: str, engine: str, version: str) -> Path | None:
    """The user data folder's copy of the release's folder; None when that folder is turned off."""
    from ..userdata import model_folder

    root = model_folder(ENGINE_SMEM)
    return root / kernel / f"{engine}-{version}" if root is not None else None


def forms_name(triton: str) -> str:
    return f"triton-{versions.major_minor(triton)}.json"


def points_name(triton: str) -> str:
    return f"points-{forms_name(triton)}"


def stored_dir(kernel: str, engine: str, version: str, triton: str) -> Path:
    """The folder whose ``triton-X.Y.json`` answers for this release: the user's, when it has one."""
    user = user_dir(kernel, engine, version)
    if user is not None and (user / forms_name(triton)).is_file():
        return user
    return package_dir(kernel, engine, version)


def write_dir(kernel: str, engine: str, version: str, package: bool) -> Path:
    """Where a calibration is written: the package's folder with ``package``, else the user's."""
    if package:
        return package_dir(kernel, engine, version)
    user = user_dir(kernel, engine, version)
    if user is None:
        from ..userdata import ENV_VAR

        raise EngineFilesError(f"the user data folder is turned off (${ENV_VAR} is empty); pass --package to write "
                               "the package's data")
    return user


def release_dirs(kernel: str, engine: str) -> dict[str, list[Path]]:
    """``{engine version: [folders]}`` of the family's calibrated releases of ``engine``, the user's
    folder before the package's."""
    out: dict[str, list[Path]] = {}
    fam = registry.find(kernel)
    if fam is None:
        return out
    bases = []
    from ..userdata import model_folder

    root = model_folder(ENGINE_SMEM)
    if root is not None:
        bases.append(root / kernel)
    bases.append(Path(fam.folder) / "smem")
    for base in bases:
        if not base.is_dir():
            continue
        for d in sorted(base.iterdir()):
            if d.is_dir() and d.name.startswith(f"{engine}-"):
                out.setdefault(d.name[len(engine) + 1:], []).append(d)
    return out
