"""Where an engine's source comes from: a released wheel (fetched with pip), a folder, the installed package.

``open_source(text)`` takes what a user writes after ``--engine`` / ``--engine-kernels``:

* ``vllm==0.33.0`` / ``sglang==0.5.23``: the release's wheel, fetched once with
  ``pip download --no-deps`` into ``<cache>/engines/wheels`` (never unpacked, never imported: its
  ``.py`` members are read straight from the zip, :func:`tilefit.pysource.extract.mount_archive`);
* a ``.whl`` file: that wheel;
* a folder: a source tree (a checkout, an unpacked wheel, site-packages);
* ``installed`` / ``vllm`` / ``sglang``: the installed package's folder (found without importing).

and returns an :class:`EngineTree`: the root the package folders hang from, which engine and
release it is (from the wheel's name or a ``*.dist-info`` folder), and what identifies it (the
wheel's sha256). Nothing here imports triton, torch or the engine.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# the archive reader (:mod:`tilefit.pysource.extract`) and subprocess are imported where a tree is
# read or a wheel fetched: a check asks only whether a source exists (:func:`local_source`)

ENGINE_NAMES = ("vllm", "sglang")
_REQ = re.compile(r"^\s*(vllm|sglang)\s*==\s*([0-9][0-9A-Za-z.+-]*)\s*$")
_WHEEL = re.compile(r"^(vllm|sglang)-([0-9][^-]*)-")


class EngineSourceError(Exception):
    """The engine's source cannot be found or fetched; the message says why."""


@dataclass(frozen=True)
class EngineTree:
    root: str  # the folder (or mounted wheel) holding the ``vllm/`` / ``sglang/`` package
    engine: str | None  # "vllm", "sglang", or None (unknown)
    version: str | None
    origin: str  # what the user named
    wheel: str | None = None  # the wheel file, when read from one
    wheel_sha256: str | None = None

    @property
    def label(self) -> str:
        if self.engine and self.version:
            return f"{self.engine}=={self.version}"
        return self.origin

    def path(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/"))

    def is_file(self, rel: str) -> bool:
        from ..pysource.extract import is_file

        return is_file(self.path(rel))

    def read(self, rel: str) -> bytes:
        from ..pysource.extract import read_bytes

        return read_bytes(self.path(rel))

    def sha256(self, path: str) -> str:
        from ..pysource.extract import read_bytes

        return hashlib.sha256(read_bytes(path)).hexdigest()

    def relative(self, path: str) -> str:
        """``path`` relative to the root, ``/``-separated (provenance never names local folders)."""
        rel = os.path.relpath(path, self.root)
        return rel.replace(os.sep, "/")

    def python_files(self):
        """Every ``.py`` file below the root (absolute paths), sorted."""
        from ..pysource.extract import _archives

        names = _archives.get(self.root)
        if names is not None:
            return [self.path(n) for n in sorted(names)]
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
        return out


def wheel_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir).expanduser() / "engines" / "wheels"
    from tilefit.cachedir import cache_root

    root = cache_root()
    if root is None:
        import tempfile

        root = Path(tempfile.gettempdir()) / "tilefit-cache"
    return root / "engines" / "wheels"


def _find_wheel(folder: Path, engine: str, version: str) -> Path | None:
    if not folder.is_dir():
        return None
    for p in sorted(folder.glob(f"{engine}-{version}-*.whl")):
        return p
    return None


def fetch_wheel(engine: str, version: str, cache_dir: str | os.PathLike | None = None,
                log=None) -> Path:
    """The wheel of ``engine==version`` in the wheel cache, fetched with ``pip download --no-deps``
    when it is not there yet."""
    folder = wheel_cache_dir(cache_dir)
    found = _find_wheel(folder, engine, version)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    if log:
        log(f"fetching {engine}=={version} with pip download --no-deps into {folder}")
    import subprocess

    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", str(folder),
           f"{engine}=={version}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineSourceError(f"pip download {engine}=={version} failed: {exc}") from None
    found = _find_wheel(folder, engine, version)
    if proc.returncode != 0 or found is None:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise EngineSourceError(f"pip download {engine}=={version} failed: {' / '.join(tail) or 'no wheel'}")
    return found


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tree_identity(root: Path) -> tuple[str | None, str | None]:
    """(engine, version) of a folder: its ``<engine>-<version>.dist-info``, else the package folder."""
    for name in ENGINE_NAMES:
        for info in sorted(root.glob(f"{name}-*.dist-info")):
            m = re.match(rf"{name}-(.+)\.dist-info$", info.name)
            if m:
                return name, m.group(1)
    for name in ENGINE_NAMES:
        if (root / name).is_dir():
            return name, None
    if root.name in ENGINE_NAMES and (root / "__init__.py").is_file():
        return root.name, None
    m = re.match(r"^(vllm|sglang)-([0-9][^/]*)$", root.name)
    if m:
        return m.group(1), m.group(2)
    return None, None


def open_wheel(path: str | os.PathLike, origin: str | None = None) -> EngineTree:
    p = Path(path).expanduser()
    if not p.is_file():
        raise EngineSourceError(f"{path}: no such wheel")
    from ..pysource.extract import mount_archive

    try:
        root = mount_archive(p)
    except Exception as exc:  # noqa: BLE001 - a broken zip is a user error
        raise EngineSourceError(f"{path}: not a readable wheel ({exc})") from None
    m = _WHEEL.match(p.name)
    engine, version = (m.group(1), m.group(2)) if m else (None, None)
    return EngineTree(root, engine, version, origin or str(path), str(p), _sha256_file(p))


def open_source(source: str, cache_dir: str | os.PathLike | None = None, log=None) -> EngineTree:
    """The :class:`EngineTree` of what ``--engine`` / ``--engine-kernels`` names (see the module doc)."""
    text = str(source)
    m = _REQ.match(text)
    if m:
        engine, version = m.group(1), m.group(2)
        return open_wheel(fetch_wheel(engine, version, cache_dir, log), origin=text)
    if text in ("installed", "vllm", "sglang"):
        roots = installed_roots(text)
        if not roots:
            raise EngineSourceError(f"no installed {'vllm or sglang' if text == 'installed' else text} found")
        root = roots[0].parent
        engine, version = _tree_identity(root)
        return EngineTree(str(root), roots[0].name, version if engine == roots[0].name else None, text)
    p = Path(text).expanduser()
    if p.suffix == ".whl":
        return open_wheel(p, origin=text)
    if not p.exists():
        raise EngineSourceError(f"{text}: no such file or folder")
    if p.is_file():
        return EngineTree(str(p.resolve().parent), _path_engine(p), None, text)
    engine, version = _tree_identity(p.resolve())
    return EngineTree(str(p.resolve()), engine, version, text)


def _path_engine(path: Path) -> str | None:
    parts = path.resolve().parts
    for name in ENGINE_NAMES:
        if name in parts:
            return name
    return None


def installed_roots(which: str) -> list[Path]:
    """Folders holding the installed ``vllm`` / ``sglang`` packages (found without importing)."""
    import importlib.util

    names = ENGINE_NAMES if which == "installed" else (which,)
    roots = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                roots.append(Path(loc))
    return roots


def engine_of_file(tree: EngineTree, path: str) -> str | None:
    """The engine a file of ``tree`` belongs to: the tree's, else its package folder's name."""
    if tree.engine:
        return tree.engine
    rel = tree.relative(path).split("/")
    for name in ENGINE_NAMES:
        if name in rel:
            return name
    return None


def local_source(engine: str, version: str | None, cache_dir: str | os.PathLike | None = None) -> str | None:
    """What to compile ``engine``'s kernels from without the network: its ``version`` wheel in the
    wheel cache (``calibrate smem --engine`` puts it there), else the installed engine; None."""
    if version:
        found = _find_wheel(wheel_cache_dir(cache_dir), engine, version)
        if found is not None:
            return str(found)
    if installed_roots(engine):
        return engine
    return None
