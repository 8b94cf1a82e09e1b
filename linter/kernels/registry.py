"""Finding the kernel families: the built-in folders, then ``$TILEFIT_KERNEL_PATH``.

A family is a folder with a ``family.json`` and a ``family.py`` (see :mod:`.family`). The built-in
ones are the sub-folders of this package; more come from ``$TILEFIT_KERNEL_PATH`` (folders
separated by ``os.pathsep``, each a family folder or a folder of family folders) or from
:func:`register` at run time, which also adds the folder to the variable so that compile workers
(spawned processes) find the same families. An external family's folder is imported as the
package ``tilefit_kernels.<name>``.

Families are loaded on first use and sorted by their ``order`` (then name); every lookup after
that is a dict lookup. ``$TILEFIT_KERNEL_PATH`` is read at that first use and again after
:func:`register` / :func:`registered` (which change it), not on every lookup.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import threading
import types
from collections.abc import Mapping
from pathlib import Path

from .family import KernelFamily, KernelFamilyError, read_data

ENV_VAR = "TILEFIT_KERNEL_PATH"
EXTERNAL_PACKAGE = "tilefit_kernels"
_BUILTIN = Path(__file__).resolve().parent

_lock = threading.RLock()
_families: dict[str, KernelFamily] | None = None
_tables: dict[str, KernelFamily] = {}
_functions: dict[str, KernelFamily] = {}
_loaded_paths: set[str] = set()
_env_seen: str | None = None


class UnknownKernel(KeyError):
    """No registered kernel family has this name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown kernel"


def _family_folders(root: Path) -> list[Path]:
    if (root / "family.json").is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "family.json").is_file())


def _external_package(folder: Path, name: str) -> str:
    """Make ``folder`` importable as ``tilefit_kernels.<name>`` (no ``__init__.py`` needed)."""
    if EXTERNAL_PACKAGE not in sys.modules:
        root = types.ModuleType(EXTERNAL_PACKAGE)
        root.__path__ = []  # type: ignore[attr-defined]
        root.__doc__ = "Kernel families registered from $TILEFIT_KERNEL_PATH (tilefit.kernels.registry)."
        sys.modules[EXTERNAL_PACKAGE] = root
    package = f"{EXTERNAL_PACKAGE}.{name}"
    existing = sys.modules.get(package)
    if existing is not None:
        if Path(list(existing.__path__)[0]).resolve() != folder.resolve():
            raise KernelFamilyError(f"{folder}: a kernel family {name!r} is already registered from "
                                    f"{list(existing.__path__)[0]}")
        return package
    init = folder / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[str(folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        module = types.ModuleType(package)
        module.__path__ = [str(folder)]  # type: ignore[attr-defined]
        module.__file__ = None
        sys.modules[package] = module
    return package


def _load_folder(folder: Path, builtin: bool) -> KernelFamily:
    data = read_data(folder)
    name = data["name"]
    if folder.name != name:
        raise KernelFamilyError(f"{folder}: the folder must be named like the family ({name})")
    package = f"{__package__}.{name}" if builtin else _external_package(folder, name)
    try:
        module = importlib.import_module(f"{package}.family")
    except ImportError as exc:
        raise KernelFamilyError(f"{folder / 'family.py'}: cannot import: {exc}") from None
    cls = getattr(module, "Family", None)
    if not (isinstance(cls, type) and issubclass(cls, KernelFamily)):
        raise KernelFamilyError(f"{folder / 'family.py'}: defines no `class Family(KernelFamily)`")
    return cls(data, folder, package)


def _add(family: KernelFamily, families: dict[str, KernelFamily]) -> None:
    if family.name in families:
        other = families[family.name]
        if other.folder.resolve() == family.folder.resolve():
            return
        raise KernelFamilyError(f"{family.folder}: kernel family {family.name!r} already comes from {other.folder}")
    table = family.table_name
    if table is not None and table in _tables and _tables[table].name != family.name:
        raise KernelFamilyError(f"{family.folder}: config family {table!r} is already launched by "
                                f"{_tables[table].name}")
    families[family.name] = family
    if table is not None:
        _tables[table] = family


def _sorted(families: dict[str, KernelFamily]) -> dict[str, KernelFamily]:
    """The families in their order, and the table and function indexes rebuilt in that order."""
    ordered = dict(sorted(families.items(), key=lambda kv: (kv[1].order, kv[0])))
    _tables.clear()
    _functions.clear()
    for fam in ordered.values():
        if fam.table_name is not None:
            _tables[fam.table_name] = fam
        for fn in (fam.reference[1], *fam.engine_functions):
            _functions.setdefault(fn, fam)
    return ordered


def _env_folders() -> list[Path]:
    return [Path(p).expanduser() for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]


_dirty = True  # re-read $TILEFIT_KERNEL_PATH at the next lookup (first use, register, registered)


def _ensure() -> dict[str, KernelFamily]:
    global _families, _env_seen, _dirty
    fams = _families
    if fams is not None and not _dirty:
        return fams  # the hot path: every spec and every table lookup comes here
    env = os.environ.get(ENV_VAR)
    _dirty = False
    if fams is not None and env == _env_seen:
        return fams
    with _lock:
        _env_seen = env
        if _families is None:
            found: dict[str, KernelFamily] = {}
            for folder in _family_folders(_BUILTIN):
                _add(_load_folder(folder, builtin=True), found)
            _families = _sorted(found)
        for root in _env_folders():
            key = str(root.resolve())
            if key in _loaded_paths:
                continue
            _loaded_paths.add(key)
            found = dict(_families)
            for folder in _family_folders(root):
                _add(_load_folder(folder, builtin=False), found)
            _families = _sorted(found)
        return _families


# -- the API ---------------------------------------------------------------------------------------

def families() -> tuple[KernelFamily, ...]:
    """Every registered family, in their ``order``."""
    return tuple(_ensure().values())


def names() -> tuple[str, ...]:
    return tuple(_ensure())


def find(name: str) -> KernelFamily | None:
    """The family called ``name``, or None."""
    return _ensure().get(name)


def get(name: str) -> KernelFamily:
    """The family called ``name``; raises :class:`UnknownKernel` (a KeyError) naming the known ones."""
    fam = _ensure().get(name)
    if fam is None:
        raise UnknownKernel(f"unknown kernel {name!r}; known: {', '.join(names())}")
    return fam


def snapshot() -> Mapping[str, KernelFamily]:
    """The registered families by name (read-only). The registry replaces this mapping whenever a
    family comes or goes, so a memo of lookups may keep it and compare identities."""
    return _ensure()


def table_names() -> tuple[str, ...]:
    """The config families whose entries launch a registered kernel (the linted tables)."""
    _ensure()
    return tuple(_tables)


def table(config_family: str | None) -> KernelFamily | None:
    """The kernel family a config family's entries launch, or None."""
    _ensure()
    return _tables.get(config_family) if config_family else None


def by_function(function: str) -> KernelFamily | None:
    """The family whose reference kernel or engine kernel has this function name."""
    _ensure()
    return _functions.get(function)


def register(folder: str | os.PathLike) -> tuple[KernelFamily, ...]:
    """Register the family folder (or folder of family folders) ``folder`` now, and for the
    processes this one starts (``$TILEFIT_KERNEL_PATH``). Returns the families it holds."""
    root = Path(folder).expanduser().resolve()
    if not _family_folders(root):
        raise KernelFamilyError(f"{root}: no family.json (a kernel family folder, or a folder of them)")
    global _dirty
    before = os.environ.get(ENV_VAR)
    current = [p for p in (before or "").split(os.pathsep) if p.strip()]
    if str(root) not in current:
        os.environ[ENV_VAR] = os.pathsep.join(current + [str(root)])
    _dirty = True
    try:
        fams = _ensure()
    except Exception:
        # a broken folder is not left on the path (processes started later would fail on it)
        _loaded_paths.discard(str(root))
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before
        _dirty = True
        raise
    return tuple(fams[data_name] for data_name in (read_data(f)["name"] for f in _family_folders(root)))


def _forget(names_: set[str]) -> None:
    global _families, _dirty
    _dirty = True
    with _lock:
        if _families is None:
            return
        _families = _sorted({n: f for n, f in _families.items() if n not in names_})


@contextlib.contextmanager
def registered(folder: str | os.PathLike):
    """Register ``folder``'s families for the duration of a ``with`` block (tests, one-off runs)."""
    root = str(Path(folder).expanduser().resolve())
    before = os.environ.get(ENV_VAR)
    fams = register(folder)
    try:
        yield fams
    finally:
        gone = {f.name for f in fams}
        _forget(gone)
        _loaded_paths.discard(root)
        for mod in [m for m in sys.modules if any(m == f"{EXTERNAL_PACKAGE}.{n}" or
                                                  m.startswith(f"{EXTERNAL_PACKAGE}.{n}.") for n in gone)]:
            del sys.modules[mod]
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before
