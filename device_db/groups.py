"""Device groups as data: ``groups.json`` names sets of devices by field values.

A group ``{"match": {"kind": "card", "smem_per_block_optin": 101376}}`` holds every device
whose fields equal all given values; a list value means "any of these". ``lead`` names the
members listed first (messages show a group's first few devices: the ones people know).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from .model import Device


@dataclass(frozen=True)
class GroupRule:
    """One named group: its description and its ``match`` object."""

    name: str
    description: str
    match: Mapping[str, Any]
    lead: tuple[str, ...] = ()  # keys of members listed first, in this order

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> "GroupRule":
        return cls(name, data["description"], MappingProxyType(dict(data["match"])), tuple(data.get("lead", ())))

    def matches(self, device: Device) -> bool:
        """Whether ``device`` belongs to the group."""
        for field_name, wanted in self.match.items():
            have = getattr(device, field_name)
            if isinstance(wanted, list):
                if have not in wanted:
                    return False
            elif have != wanted:
                return False
        return True

    def members(self, devices: Iterable[Device]) -> tuple[Device, ...]:
        """The matching devices: the ``lead`` ones first, in their order, then the others in the
        given order (a lead key that is not a member is ignored)."""
        found = [d for d in devices if self.matches(d)]
        rank = {key: i for i, key in enumerate(self.lead)}
        return tuple(sorted(found, key=lambda d: rank.get(d.key, len(rank))))


def parse_groups(data: Mapping[str, Any]) -> tuple[GroupRule, ...]:
    """Group rules from a schema-valid ``groups.json`` object."""
    return tuple(GroupRule.from_dict(name, body) for name, body in data["groups"].items())
