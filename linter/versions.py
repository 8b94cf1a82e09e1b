"""Version strings, parsed one way everywhere (``packaging.version``).

Triton, the engines and tilefit's own data files carry versions: ``3.6.0``, ``3.4.0+git1a2b3c``
(a source build), ``3.9`` (a model file), ``0.5.23`` (an engine profile), ``v0.33.0`` (typed by a
user). :func:`parse` reads each into a :class:`packaging.version.Version`; a string that is not
PEP 440 (``3.4.0-custom``) is read by its leading release numbers, so every caller compares the
same way: ``3.4.0+git...`` is release ``(3, 4, 0)`` for the model picker, the compile checks and
the profile lookup alike.

:func:`installed_triton` is the installed Triton's version from package metadata (it does not
import triton); the distributions tried are those Triton ships as (``triton``, PyTorch's
``pytorch-triton`` and the ROCm builds).
"""

from __future__ import annotations

import os
import re
import sys
from functools import lru_cache

from packaging.version import InvalidVersion, Version

_LEADING_RELEASE = re.compile(r"\d+(?:\.\d+)*")

# Distributions that install the ``triton`` package, in the order they are looked up.
TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-rocm")


@lru_cache(maxsize=512)
def parse(text: str) -> Version:
    """``text`` as a :class:`Version`: PEP 440 when it is (a leading ``v`` is allowed), else its
    leading release numbers (``"3.4.0-custom"`` -> ``3.4.0``); ``0`` when it has none."""
    s = str(text).strip()
    try:
        return Version(s)
    except InvalidVersion:
        m = _LEADING_RELEASE.search(s)
        return Version(m.group() if m else "0")


def is_version(text: str) -> bool:
    """Whether ``text`` names a release: ``3.9``, ``3.6.0``, ``v3.4.0+git12`` (not ``abc``, ``3``)."""
    return re.match(r"v?\d+(\.\d+)+", str(text).strip()) is not None


def release(text: str, parts: int | None = None) -> tuple[int, ...]:
    """The release numbers of ``text``: ``"3.4.0+git12"`` -> ``(3, 4, 0)``. With ``parts``, cut
    or padded with zeros to that many (``release("3.9", 3)`` -> ``(3, 9, 0)``)."""
    numbers = parse(text).release
    if parts is None:
        return tuple(numbers)
    return tuple(numbers[:parts]) + (0,) * max(0, parts - len(numbers))


def major_minor(text: str) -> str:
    """``"3.6.0"`` / ``"3.6.0+git12"`` -> ``"3.6"`` (the shared-memory model files' version)."""
    major, minor = release(text, 2)
    return f"{major}.{minor}"


@lru_cache(maxsize=None)
def installed(*distributions: str) -> str | None:
    """The version of the first installed distribution of ``distributions`` (package metadata,
    nothing is imported), or None. Memoised per process: reading a distribution's metadata
    parses its METADATA file (a few milliseconds), and a check asks once per estimate -- a
    quarter of a cold corpus check's time; what is installed does not change under a running
    check (:func:`forget_installed` for a process that installs)."""
    found = _dist_info_versions()
    for dist in distributions:
        hit = found.get(_normal(dist))
        if hit is not None:
            return hit
    from importlib.metadata import PackageNotFoundError, version  # egg-info, zips: the full lookup

    for dist in distributions:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_versions() -> dict[str, str]:
    """``{normalised name: version}`` of the ``NAME-VERSION.dist-info`` folders on ``sys.path``,
    the first of a name winning (the order :mod:`importlib.metadata` searches in). Reading the
    folder names costs a directory listing per path entry; importing :mod:`importlib.metadata`
    (email, zipfile, csv ...) costs a cold check a third of a bare ``json.load`` loop's time."""
    out: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # not a folder (a zip), or gone
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                dist, _, ver = name[: -len(".dist-info")].partition("-")
                if ver and os.path.isfile(os.path.join(entry or ".", name, "METADATA")):
                    out.setdefault(_normal(dist), ver)
    return out


def forget_installed() -> None:
    installed.cache_clear()


def installed_triton() -> str | None:
    """The installed Triton's version, without importing it (None when Triton is absent)."""
    return installed(*TRITON_DISTRIBUTIONS)
