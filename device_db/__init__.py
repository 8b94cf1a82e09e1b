"""tilefit's GPU device database: limits and speeds of the GPUs configs are checked against.

One JSON file per device under ``devices/`` (validated by ``schema.json``), per-architecture
entries (``sm_89``, ``gfx942``...) next to the cards, and named groups in ``groups.json``.
Sources and a confidence code per field (C/T/D/I/U) travel with the data.

Usage::

    from tilefit.device_db import load_database

    db = load_database()                       # or load_database(["my_gpus.json"])
    db.resolve_target("rtx4090")               # key, alias, file/torch name, sm_89, 8.9, group
    db.resolve_target("consumer")              # every 99 KB card
    db.by_file_name("NVIDIA_H200_NVL", engine="vllm", family="vl.fused_moe")
    db.get("h100-sxm").smem_per_block_optin   # 232448
    db.arch_device("sm_90a")                   # per-architecture limits

Importing this package does not import jsonschema; validation results are cached (see
:mod:`tilefit.device_db.cache`), so a warm ``load_database()`` takes a few milliseconds.
"""

from .database import DeviceDB
from .errors import DeviceDBError, UnknownDevice, UnknownTarget
from .loader import load_database
from .model import ARCH_FIELDS, TENSOR_DTYPES, Device, TensorTflops

__all__ = [
    "ARCH_FIELDS",
    "TENSOR_DTYPES",
    "Device",
    "DeviceDB",
    "DeviceDBError",
    "TensorTflops",
    "UnknownDevice",
    "UnknownTarget",
    "load_database",
]
