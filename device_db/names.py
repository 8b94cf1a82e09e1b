"""How engines spell device names, and how users spell architectures. Pure string functions.

* SGLang writes ``torch.cuda.get_device_name()`` with each space replaced by ``_``.
* vLLM replaces every run of whitespace or ``/`` by ``_``; some of its lookups (fused MoE, say its
  profiles) fold any name whose ``_``-split tokens contain ``H200`` to ``NVIDIA_H200``.
* vLLM Helion names config files by a lower-case canonical platform name (``nvidia_h100``).
* Users type architectures as ``sm_89``, ``sm89``, ``sm_90a``, ``8.9``, ``gfx942`` or HIP's
  ``gfx942:sramecc+:xnack-``.
"""

from __future__ import annotations

import re

ENGINES = ("vllm", "sglang")
# Config families (engines.md's "vl."/"sg." prefixes are accepted too) named by Helion platforms.
# Which lookups fold H200 variants is the engines' rule: their profiles say (tilefit.serving).
HELION_FAMILIES = frozenset({"helion"})
H200_FILE_NAME = "NVIDIA_H200"

_VLLM_SEP = re.compile(r"[\s/]+")
_CANON_SEP = re.compile(r"[\s/_-]+")
_HELION = re.compile(r"^(?:nvidia|amd|intel)_([a-z0-9][a-z0-9_.]*)$")
_SM = re.compile(r"^(?:sm|compute|cc)_?(\d{2,3})[af]?$")
_DOTTED = re.compile(r"^(\d{1,2})\.(\d)$")
_GFX = re.compile(r"^(gfx[0-9]{1,2}[0-9a-f]{2,3})(?::.*)?$")
_XE = re.compile(r"^xe\d+$")


def sglang_file_name(name: str) -> str:
    """SGLang's file-name form of a device name: each space becomes ``_``."""
    return name.replace(" ", "_")


def vllm_file_name(name: str) -> str:
    """vLLM's file-name form: every run of whitespace or ``/`` becomes ``_``."""
    return _VLLM_SEP.sub("_", name)


def vllm_moe_folds_to_h200(file_name: str) -> bool:
    """True when vLLM's fused-MoE lookup would use ``NVIDIA_H200`` for this device name."""
    return "H200" in file_name.split("_")


def canonical_name(name: str) -> str:
    """Spelling-insensitive form: lower case, runs of whitespace, ``/``, ``_``, ``-`` -> ``_``."""
    return _CANON_SEP.sub("_", name.strip().lower()).strip("_")


def helion_short_names(name: str) -> tuple[str, ...]:
    """Candidate aliases of a Helion platform name: ``nvidia_h100`` -> ``("h100",)``;
    ``nvidia_rtx_pro_6000`` -> ``("rtx_pro_6000", "rtx-pro-6000", "rtxpro6000")``."""
    m = _HELION.match(name)
    if not m:
        return ()
    short = m.group(1)
    return tuple(dict.fromkeys((short, short.replace("_", "-"), short.replace("_", ""))))


def parse_arch(spec: str) -> str | None:
    """Normalise an architecture spelling to an arch key, or None if ``spec`` is not one.

    ``sm_89``, ``sm89``, ``SM_89``, ``sm_90a``, ``compute_90``, ``8.9`` -> ``sm_89``/``sm_90``;
    ``gfx942``, ``gfx942:sramecc+:xnack-`` -> ``gfx942``; ``xe2`` -> ``xe2``.
    """
    s = spec.strip().lower()
    m = _SM.match(s)
    if m:
        return f"sm_{int(m.group(1))}"
    m = _DOTTED.match(s)
    if m:
        return f"sm_{int(m.group(1))}{m.group(2)}"
    m = _GFX.match(s)
    if m:
        return m.group(1)
    if _XE.match(s):
        return s
    return None


def arch_order(arch: str) -> tuple:
    """A sort key that lists arch keys as people count them: ``sm_80`` < ``sm_86`` < ``sm_89`` <
    ``sm_90`` < ``sm_120`` (not string order, which puts ``sm_120`` first), ``gfx90a`` < ``gfx942``;
    a key of no known spelling sorts by its text after the others of its prefix."""
    m = _ARCH_PARTS.match(arch)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (arch, 0, "")


_ARCH_PARTS = re.compile(r"^([a-z_]+?)(\d+)(.*)$")


def family_base(family: str | None) -> str | None:
    """A family name without engines.md's engine prefix: ``vl.fused_moe`` -> ``fused_moe``."""
    if family and family[:3] in ("vl.", "sg."):
        return family[3:]
    return family


def engine_of_family(family: str | None) -> str | None:
    """The engine a family short name belongs to (``vl.*`` -> vllm, ``sg.*`` -> sglang)."""
    if not family:
        return None
    if family.startswith("vl."):
        return "vllm"
    if family.startswith("sg."):
        return "sglang"
    return None
