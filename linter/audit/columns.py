"""The matrix's columns: device classes (devices that get identical verdicts, as the engine groups
them), named by the cards people know.

A class's label lists its best-known cards first (``data/well_known_devices.json``), then the
rest: consumer before workstation, datacenter and embedded parts, the fastest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from tilefit.devicerank import known_first
from tilefit.engine import class_key, group_devices
from tilefit.smem.probe import short_name

LABEL_CARDS = 2
_PARENS = re.compile(r"\s*\([^)]*\)")
VENDOR_ORDER = {"NVIDIA": 0, "AMD": 1, "Intel": 2}  # cards named in a column label; the rest are counted ("+8")


@dataclass(frozen=True)
class Column:
    """One device class of the audit."""

    index: int
    key: tuple  # tilefit.engine.class_key of its devices
    devices: tuple  # Device records, best known first
    target: bool  # a --target class (else only some table's own device)

    @property
    def first(self):
        return self.devices[0]

    @property
    def arch(self) -> str:
        return self.first.arch

    @property
    def vendor(self) -> str:
        return self.first.vendor

    @property
    def limit(self) -> int | None:
        return self.first.smem_per_block_optin

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(short_name(d) for d in self.devices))

    @property
    def label(self) -> str:
        return cards_label(self.devices)

    def to_json(self) -> dict:
        return {"id": self.index, "label": self.label, "arch": self.arch, "vendor": self.vendor,
                "limit": self.limit, "names": self.names, "keys": [d.key for d in self.devices],
                "target": self.target}


def cards_label(devices: Sequence, shown: int = LABEL_CARDS) -> str:
    """``RTX 4090, L40S +8``: the best-known models first, variants of a named one skipped (the
    RTX 4090 D after the RTX 4090), parenthesised details dropped, the rest counted."""
    names = list(dict.fromkeys(_PARENS.sub("", short_name(d)).strip() for d in known_first(devices)))
    picked: list[str] = []
    for n in names:
        if len(picked) == shown:
            break
        if not any(n.startswith(p) for p in picked):
            picked.append(n)
    rest = len(names) - len(picked)
    return ", ".join(picked) + (f" +{rest}" if rest > 0 else "")


def column_order(device) -> tuple:
    """NVIDIA, AMD, Intel; within a vendor by architecture number (sm_86 before sm_120)."""
    digits = re.findall(r"\d+", device.arch)
    return (VENDOR_ORDER.get(device.vendor, 9), int(digits[0]) if digits else 0, device.arch)


class Columns:
    """The classes of a run: the --target classes first (in the order given), then the classes of
    the tables' own devices that are not targets."""

    def __init__(self, targets: Sequence = ()):
        self.columns: list[Column] = []
        self._by_key: dict[tuple, Column] = {}
        for dclass in sorted(group_devices(targets), key=lambda c: column_order(c.first)):
            self._add(dclass.devices, target=True)

    def _add(self, devices, target: bool) -> Column:
        col = Column(len(self.columns), class_key(devices[0]), tuple(known_first(devices)), target)
        self.columns.append(col)
        self._by_key[col.key] = col
        return col

    def of(self, device) -> Column:
        """The column of ``device``, added (as a non-target class) when new; a device of a class
        that is already a column joins it."""
        key = class_key(device)
        col = self._by_key.get(key)
        if col is None:
            return self._add((device,), target=False)
        if all(d.key != device.key for d in col.devices):
            grown = Column(col.index, col.key, tuple(known_first(col.devices + (device,))), col.target)
            self.columns[col.index] = grown
            self._by_key[key] = grown
            return grown
        return col

    @property
    def targets(self) -> list[Column]:
        return [c for c in self.columns if c.target]

    def __iter__(self):
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)
