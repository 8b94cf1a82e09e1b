"""The device record: one GPU (``kind="card"``) or one architecture (``kind="arch"``).

A :class:`Device` is frozen and hashable (``status``/``status_detail`` are plain dicts left out of
the hash so :func:`dataclasses.asdict` works; treat them as read-only). Field meanings and units are those of
``schema.json``: sizes in bytes, bandwidth in GB/s, clocks in MHz, dense throughput in TFLOPS.
``None`` means unknown. ``status`` gives the confidence code of each field
(C/T/D/I/U, see ``devices.md``), ``status_detail`` the evidence per field group.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

TENSOR_DTYPES = ("fp16_fp32acc", "fp16", "fp8", "int8", "fp32")

# Per-architecture limits: a card whose file omits one of these takes it from its arch entry.
ARCH_FIELDS = (
    "compute_capability",
    "smem_per_block_optin",
    "smem_per_sm",
    "smem_static_per_block",
    "reserved_smem_per_block",
    "regs_per_sm",
    "regs_per_block",
    "max_regs_per_thread",
    "max_threads_per_block",
    "max_threads_per_sm",
    "max_blocks_per_sm",
    "warp_size",
    "triton_fp8_dtypes",
    "mma",
    "features",
)

# tl.dot lowering -> arch family of the shared-memory model (docs/DESIGN.md).
_ARCH_FAMILY = {
    "fma": "fma",
    "mma_v2": "mma_v2",
    "wgmma": "wgmma",
    "tcgen05": "tcgen05",
    "mfma": "amd",
    "wmma": "amd",
}


@dataclass(frozen=True)
class TensorTflops:
    """Peak dense throughput by dtype (TFLOPS; TOPS for int8). ``fp32`` is non-tensor FP32."""

    fp16_fp32acc: float | None = None
    fp16: float | None = None
    fp8: float | None = None
    int8: float | None = None
    fp32: float | None = None


@dataclass(frozen=True)
class Device:
    """One device of the database. Build it with :meth:`from_dict`; see ``schema.json``."""

    key: str
    kind: str
    vendor: str
    name: str
    arch: str
    file_names: tuple[str, ...] = ()
    torch_names: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    segment: str | None = None
    architecture: str | None = None
    chip: str | None = None
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    smem_per_block_optin: int | None = None
    smem_per_sm: int | None = None
    smem_static_per_block: int | None = None
    reserved_smem_per_block: int | None = None
    regs_per_sm: int | None = None
    regs_per_block: int | None = None
    max_regs_per_thread: int | None = None
    max_threads_per_block: int | None = None
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    warp_size: int | None = None
    l2_bytes: int | None = None
    memory_gb: float | None = None
    memory_bandwidth_gbps: float | None = None
    boost_clock_mhz: float | None = None
    tensor_tflops: TensorTflops | None = None
    triton_fp8_dtypes: tuple[str, ...] | None = None
    mma: str | None = None
    features: tuple[str, ...] = ()
    status: Mapping[str, str] = field(default_factory=dict, hash=False)
    status_detail: Mapping[str, str] = field(default_factory=dict, hash=False)
    sources: tuple[str, ...] = ()
    notes: str | None = None
    # Where the record came from (a file path); not part of equality.
    origin: str = field(default="", compare=False, hash=False)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], origin: str = "") -> "Device":
        """Build a device from a schema-valid mapping (lists become tuples, absent keys defaults)."""
        kwargs: dict[str, Any] = {}
        for name in _DEVICE_FIELDS:
            if name not in data:
                continue
            value = data[name]
            if name == "tensor_tflops":
                value = None if value is None else TensorTflops(**value)
            elif name in ("status", "status_detail"):
                value = dict(value)
            elif name == "compute_capability":
                value = None if value is None else (int(value[0]), int(value[1]))
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[name] = value
        return cls(origin=origin, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a valid device file object); inverse of :meth:`from_dict`."""
        out: dict[str, Any] = {}
        for name in _DEVICE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, TensorTflops):
                value = {d: getattr(value, d) for d in TENSOR_DTYPES}
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    # ------------------------------------------------------------------ derived facts

    @property
    def is_card(self) -> bool:
        return self.kind == "card"

    @property
    def is_arch(self) -> bool:
        return self.kind == "arch"

    @property
    def is_nvidia(self) -> bool:
        return self.vendor == "NVIDIA"

    @property
    def is_amd(self) -> bool:
        return self.vendor == "AMD"

    @property
    def is_intel(self) -> bool:
        return self.vendor == "Intel"

    @property
    def cc(self) -> int | None:
        """Compute capability as one int (8.9 -> 89, 10.0 -> 100); None off NVIDIA."""
        if self.compute_capability is None:
            return None
        major, minor = self.compute_capability
        return major * 10 + minor

    @property
    def arch_family(self) -> str | None:
        """Arch family of the shared-memory model: fma, mma_v2, wgmma, tcgen05, amd (None if unknown)."""
        return _ARCH_FAMILY.get(self.mma or "")

    @property
    def file_name(self) -> str | None:
        """The preferred file-name spelling (first of ``file_names``), if any."""
        return self.file_names[0] if self.file_names else None

    def status_of(self, field_name: str) -> str | None:
        """Confidence code (C/T/D/I/U) of a field, e.g. ``status_of("sm_count")``; None if unrated."""
        return self.status.get(field_name)

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"


# Data fields in declaration order (everything but ``origin``).
_DEVICE_FIELDS = tuple(f.name for f in fields(Device) if f.name != "origin")
