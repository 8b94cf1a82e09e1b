"""``--allow-import``: ask the installed engine's own functions instead of the bundled profile.

Never done by default: importing SGLang or vLLM pulls in torch, CUDA and the engine's plugins.
With ``--allow-import`` the doctor imports the engine's fused-MoE config module and, where its
functions can be called with the model's sizes, uses

* ``get_default_config`` for the default config at each batch size, and
* ``get_config_file_name`` for the table name (only for the local GPU: the engine reads the
  device name from the GPU it runs on).

Signatures differ between releases, so arguments are bound by parameter name; any failure
(missing module, changed signature, no GPU) falls back to the profile and says so.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

MODULES = {
    "sglang": ("sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config",
               "sglang.srt.layers.moe.fused_moe_triton.fused_moe_triton_config",
               "sglang.srt.layers.moe.fused_moe_triton.fused_moe"),
    "vllm": ("vllm.model_executor.layers.fused_moe.fused_moe",),
}


def _bind(fn: Callable, values: dict[str, Any]) -> tuple[list, dict]:
    """Positional/keyword arguments for ``fn`` from ``values`` by parameter name; KeyError if a
    required parameter has no value."""
    sig = inspect.signature(fn)
    args, kwargs = [], {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.name in values:
            if p.kind == p.POSITIONAL_ONLY:
                args.append(values[p.name])
            else:
                kwargs[p.name] = values[p.name]
        elif p.default is p.empty:
            raise KeyError(p.name)
    return args, kwargs


class EngineFunctions:
    """The engine's config functions, or the reason they cannot be used."""

    def __init__(self, engine: str):
        self.engine = engine
        self.module = None
        self.error: str | None = None
        self.failures: list[str] = []
        for name in MODULES.get(engine, ()):
            try:
                self.module = importlib.import_module(name)
                break
            except Exception as exc:  # noqa: BLE001 - anything an engine import raises
                self.error = f"cannot import {name}: {type(exc).__name__}: {exc}"
        if self.module is not None:
            self.error = None

    @property
    def ok(self) -> bool:
        return self.module is not None

    def describe(self) -> str:
        if not self.ok:
            return f"--allow-import: {self.error}; using the bundled profile"
        note = f"--allow-import: default configs from {self.module.__name__}.get_default_config"
        if self.failures:
            note += f" (fell back to the profile: {self.failures[0]})"
        return note

    def _fail(self, what: str) -> None:
        if what not in self.failures:
            self.failures.append(what)

    def moe_default(self, M: int, moe, quant) -> dict | None:
        fn = getattr(self.module, "get_default_config", None) if self.ok else None
        if fn is None:
            return None
        dtype = quant.dtype if quant.is_quantised else None
        values = {"M": M, "E": moe.E, "N": moe.N, "K": moe.K, "topk": moe.top_k, "top_k": moe.top_k,
                  "dtype": dtype, "is_marlin": False, "block_shape": list(quant.block) if quant.block else
                  (list(quant.block_shape) if quant.block_shape else None),
                  "per_channel_quant": quant.scheme == "per_channel"}
        try:
            args, kwargs = _bind(fn, values)
            cfg = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self._fail(f"get_default_config: {type(exc).__name__}: {exc}")
            return None
        if not isinstance(cfg, dict):
            self._fail(f"get_default_config returned {type(cfg).__name__}")
            return None
        return dict(cfg)

    def moe_file_name(self, moe, quant, dtype_name: str | None, fallback: str) -> str:
        fn = getattr(self.module, "get_config_file_name", None) if self.ok else None
        if fn is None:
            return fallback
        values = {"E": moe.E, "N": moe.N, "dtype": dtype_name,
                  "block_shape": list(quant.block) if quant.block else None,
                  "per_channel_quant": quant.scheme == "per_channel"}
        try:
            args, kwargs = _bind(fn, values)
            name = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self._fail(f"get_config_file_name: {type(exc).__name__}: {exc}")
            return fallback
        return name if isinstance(name, str) and name.endswith(".json") else fallback
