"""Targets of ``tilefit doctor``: ``--target`` values through the device database, or the local GPU."""

from __future__ import annotations

from typing import Sequence

from tilefit.api import UsageError, resolve_targets

from .core import Target


def runtime_name(device) -> str | None:
    """The name the runtime reports for a card (torch/NVML), None for an architecture entry."""
    if device.kind != "card":
        return None
    if device.torch_names:
        return device.torch_names[0]
    if device.file_names:
        return device.file_names[0]
    return None


def from_specs(db, specs: Sequence[str]) -> list[Target]:
    targets = []
    seen = set()
    for device in resolve_targets(db, list(specs)):
        if device.key in seen:
            continue
        seen.add(device.key)
        targets.append(Target(device, runtime_name(device), "--target"))
    return targets


def local_target(db) -> Target:
    """The GPU torch sees as device 0 (torch is imported only here)."""
    try:
        import torch
    except ImportError:
        raise UsageError("--device local needs torch to see the GPU; pass --target instead") from None
    try:
        if not torch.cuda.is_available():
            raise UsageError("--device local: torch sees no GPU; pass --target (e.g. --target rtx4090)")
        name = torch.cuda.get_device_name(0)
        major, minor = torch.cuda.get_device_capability(0)
        props = torch.cuda.get_device_properties(0)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken driver is a usage problem here
        raise UsageError(f"--device local: cannot query the GPU: {exc}") from None
    device = db.by_file_name(name)
    if device is None:
        hip = getattr(torch.version, "hip", None)
        arch = getattr(props, "gcnArchName", "").split(":")[0] if hip else f"sm_{major}{minor}"
        try:
            device = db.arch_device(arch)
        except Exception:  # noqa: BLE001
            raise UsageError(f"--device local: {name!r} ({arch}) is neither in the device database nor a known "
                             "architecture; add it with --device-file") from None
    return Target(device, name, "local")
