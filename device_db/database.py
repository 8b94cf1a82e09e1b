"""The loaded device database: lookups by key, alias, file name, architecture and group.

:class:`DeviceDB` is immutable. Its constructor builds the lookup indexes and rejects clashes
(two devices with one key, alias, file name or torch name, or an alias equal to a group name)
with :class:`DeviceDBError`, naming both origins.
"""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping, Sequence

from . import names
from .errors import DeviceDBError, UnknownDevice, UnknownTarget
from .groups import GroupRule
from .model import Device

_HINT = "`tilefit devices` lists all devices, architectures and groups"


class DeviceDB:
    """All known devices.

    ``devices`` holds cards first, then arch entries, each sorted by vendor and key;
    ``groups`` maps a group name to the keys of its members.
    """

    def __init__(self, devices: Iterable[Device], group_rules: Sequence[GroupRule] = ()) -> None:
        given = list(devices)
        self._devices = tuple(sorted(given, key=lambda d: (d.kind != "card", d.vendor, d.key)))
        self._by_key: dict[str, Device] = {}
        self._by_name: dict[str, Device] = {}  # lower-case keys and aliases
        self._files: dict[str, Device] = {}
        self._torch: dict[str, Device] = {}
        self._canonical: dict[str, Device | None] = {}  # None: ambiguous
        self._arch: dict[str, Device] = {}
        for device in given:  # in the given order, so a clash blames the later device
            self._index(device)
        groups: dict[str, tuple[str, ...]] = {}
        descriptions: dict[str, str] = {}
        for rule in group_rules:
            clash = self._by_name.get(rule.name.lower())
            if clash is not None:
                raise DeviceDBError(
                    f"{clash.origin}: key or alias {rule.name!r} of device {clash.key!r} is the name of a "
                    "group (groups.json)"
                )
            groups[rule.name] = tuple(d.key for d in rule.members(self._devices))
            descriptions[rule.name] = rule.description
        self._groups = MappingProxyType(groups)
        self._group_descriptions = MappingProxyType(descriptions)

    def _index(self, device: Device) -> None:
        def claim(index: dict[str, Device], name: str, what: str) -> None:
            other = index.get(name)
            if other is not None and other is not device:
                raise DeviceDBError(
                    f"{device.origin}: duplicate {what} {name!r}: device {device.key!r} "
                    f"clashes with device {other.key!r} ({other.origin or 'bundled'})"
                )
            index[name] = device

        claim(self._by_key, device.key, "device key")
        claim(self._by_name, device.key.lower(), "key/alias")
        for alias in device.aliases:
            claim(self._by_name, alias.lower(), "key/alias")
        for file_name in device.file_names:
            claim(self._files, file_name, "file name")
        for torch_name in device.torch_names:
            claim(self._torch, torch_name, "torch name")
        for spelling in (*device.file_names, *device.torch_names):
            canon = names.canonical_name(spelling)
            if self._canonical.get(canon, device) is not device:
                self._canonical[canon] = None
            else:
                self._canonical[canon] = device
        if device.kind == "arch":
            claim(self._arch, device.arch, "arch entry for")

    # ------------------------------------------------------------------ collection

    @property
    def devices(self) -> tuple[Device, ...]:
        """Every device: cards, then arch entries."""
        return self._devices

    @property
    def cards(self) -> tuple[Device, ...]:
        """Every device of kind ``card``."""
        return tuple(d for d in self._devices if d.kind == "card")

    @property
    def groups(self) -> Mapping[str, tuple[str, ...]]:
        """Group name -> keys of its members (``consumer``, ``datacenter``, ``all``)."""
        return self._groups

    @property
    def group_descriptions(self) -> Mapping[str, str]:
        """Group name -> one-sentence description from ``groups.json``."""
        return self._group_descriptions

    def __iter__(self) -> Iterator[Device]:
        return iter(self._devices)

    def __len__(self) -> int:
        return len(self._devices)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    # ------------------------------------------------------------------ lookups

    def get(self, key: str) -> Device:
        """The device with this key (exact, else case-insensitive); :class:`UnknownDevice` if none."""
        device = self._by_key.get(key) or self._by_key.get(key.lower())
        if device is None:
            suggestions = difflib.get_close_matches(key.lower(), list(self._by_key), n=3, cutoff=0.6)
            message = f"unknown device key {key!r}"
            if suggestions:
                message += f"; did you mean {', '.join(suggestions)}?"
            raise UnknownDevice(message, key, suggestions)
        return device

    def arch_device(self, arch: str) -> Device:
        """The arch entry of an architecture: ``sm_89``, ``sm_90a``, ``8.9``, ``gfx942:sramecc+``..."""
        normalized = names.parse_arch(arch) or arch.strip().lower()
        device = self._arch.get(normalized)
        if device is None:
            suggestions = difflib.get_close_matches(normalized, list(self._arch), n=3, cutoff=0.6)
            message = f"no arch entry for {arch!r}"
            if suggestions:
                message += f"; did you mean {', '.join(suggestions)}?"
            raise UnknownDevice(message, arch, suggestions)
        return device

    def by_file_name(self, name: str, engine: str | None = None, family: str | None = None, *,
                     h200_fold: bool = False) -> Device | None:
        """The device a config file's ``device_name`` value stands for, or None if unknown.

        Tried in order: exact file-name spelling; exact torch name (with spaces); the engine's
        own normalisation (vLLM: runs of whitespace and ``/`` -> ``_``; SGLang: spaces -> ``_``;
        both when ``engine`` is None); with ``h200_fold`` (the lookup folds H200 variants, as
        vLLM's fused MoE does: the caller knows from the engine profiles,
        ``tilefit.serving.naming.device_for_file_name``) any name with an ``H200`` token ->
        ``NVIDIA_H200``; a spelling-insensitive match (case, ``-``/``_``/space); Helion platform
        names (``nvidia_h100`` -> alias ``h100``; tried first for ``family="helion"``). ``family``
        is a config family name (``fused_moe``, ``helion``...); engines.md's prefixed names
        (``vl.fused_moe``) also work and imply the engine. The empty name gives None.

        A name that identifies an architecture but no product returns the arch entry
        (``AMD_Radeon_Graphics`` -> ``gfx942``; check ``device.kind``).
        """
        name = name.strip()
        if not name:
            return None
        engine = (engine or names.engine_of_family(family) or "").lower() or None
        family = names.family_base(family)
        if family in names.HELION_FAMILIES:
            device = self._helion(name)
            if device is not None:
                return device
        device = self._files.get(name) or self._torch.get(name)
        if device is not None:
            return device
        candidates = []
        if engine in (None, "vllm"):
            candidates.append(names.vllm_file_name(name))
        if engine in (None, "sglang"):
            candidates.append(names.sglang_file_name(name))
        for candidate in candidates:
            device = self._files.get(candidate)
            if device is not None:
                return device
        if h200_fold:
            if names.vllm_moe_folds_to_h200(names.vllm_file_name(name)):
                device = self._files.get(names.H200_FILE_NAME)
                if device is not None:
                    return device
        device = self._canonical.get(names.canonical_name(name))
        if device is not None:
            return device
        return self._helion(name)

    def _helion(self, name: str) -> Device | None:
        for short in names.helion_short_names(name):
            device = self._by_name.get(short)
            if device is not None:
                return device
        return None

    def resolve_target(self, spec: str) -> tuple[Device, ...]:
        """Devices a ``--target`` value stands for.

        Accepts a key or alias (case-insensitive), a group name (``consumer``, ``datacenter``,
        ``all``), a file name or torch name, or an architecture (``sm_89``, ``sm89``, ``8.9``,
        ``sm_90a``, ``gfx942``) which gives its arch entry. Several values may be joined with
        commas; the result keeps their order without repeats. Raises :class:`UnknownTarget`
        with close matches otherwise.
        """
        parts = [p.strip() for p in spec.split(",")]
        result: dict[str, Device] = {}
        for part in parts:
            for device in self._resolve_one(part):
                result.setdefault(device.key, device)
        return tuple(result.values())

    def _resolve_one(self, spec: str) -> tuple[Device, ...]:
        if not spec:
            raise UnknownTarget(f"empty target; {_HINT}", spec, ())
        lowered = spec.lower()
        device = self._by_name.get(lowered)
        if device is not None:
            return (device,)
        if lowered in self._groups:
            return tuple(self._by_key[k] for k in self._groups[lowered])
        device = self.by_file_name(spec)
        if device is not None:
            return (device,)
        arch = names.parse_arch(spec)
        if arch is not None and arch in self._arch:
            return (self._arch[arch],)
        suggestions = self._suggest(lowered)
        message = f"unknown target {spec!r}"
        if arch is not None:
            message = f"no arch entry for {spec!r} ({arch})"
        if suggestions:
            message += f"; did you mean {', '.join(suggestions)}?"
        raise UnknownTarget(f"{message} ({_HINT})", spec, suggestions)

    def _suggest(self, lowered: str) -> list[str]:
        display: dict[str, str] = {}
        for device in self._devices:
            for spelling in (device.key, *device.aliases, *device.file_names):
                display.setdefault(spelling.lower(), spelling)
        for group in self._groups:
            display.setdefault(group, group)
        matches = difflib.get_close_matches(lowered, list(display), n=5, cutoff=0.6)
        return list(dict.fromkeys(display[m] for m in matches))
