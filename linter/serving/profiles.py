"""Engine version profiles: how one engine release names, finds and defaults its tuning tables.

A profile is data (``data/engine_profiles/<engine>-<version>.json``): the file-name grammar
(dtype strings, ``block_shape`` spacing, ``per_channel_quant``, ``_down``), the folders searched
(environment variable, package folder, SGLang's ``triton_X_Y_Z`` folders and their fallback),
the device-name spelling, and the default-config logic as an ordered list of cases whose
conditions and values are formulas (:mod:`tilefit.formula`) over:

=========  =======================================================================
``M``      tokens of the call (the batch size the table is keyed by)
``E N K``  experts, N and K of the GEMM (the file name's E and N)
``TOPK``   experts per token
``BN_Q``   quantisation block_n (0 when not block-quantised); ``BK_Q`` block_k
``GROUP``  weight-only group size (0 when none)
``FP8``    1 for ``fp8_w8a8``; ``INT8`` for ``int8_w8a8``; ``WNA16`` for grouped int4/int8
``BLOCK``  1 when block-quantised; ``PER_CHANNEL`` 1 for per-channel scales
``HIP``    1 on AMD; ``GFX1250`` 1 on gfx1250; ``SMEM`` the device's opt-in bytes per block
``BK``     (block GEMM ``bk_raise`` only) the entry's BLOCK_SIZE_K
``LK``     MLA: kv_lora_rank + qk_rope_head_dim; ``BLOCK_DMODEL`` its latent block
=========  =======================================================================

The first case whose ``when`` is true gives the config; values are numbers or formulas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from tilefit import versions
from tilefit.formula import compile_formula

VARIABLES = ("M", "E", "N", "K", "TOPK", "BN_Q", "BK_Q", "GROUP", "FP8", "INT8", "WNA16", "BLOCK",
             "PER_CHANNEL", "HIP", "GFX1250", "SMEM", "BK", "LK", "BLOCK_DMODEL")
from .data import ENGINES, ProfileError, raw_profiles  # noqa: F401 - the profiles' JSON, read once


class Formula:
    """A number or a formula string from a profile, evaluated with defaults for unset variables."""

    def __init__(self, value: Any, where: str):
        self.text = value
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ProfileError(f"{where}: {value!r} is neither a number nor a formula")
        self._const = value if isinstance(value, int) else None
        self._fn = None if isinstance(value, int) else compile_formula(value, VARIABLES)

    def __call__(self, env: Mapping[str, float]) -> Any:
        if self._const is not None:
            return self._const
        if len(env) != len(VARIABLES):  # fast path for complete environments (full_env)
            env = full_env(env)
        return self._fn(**env)


def full_env(values: Mapping[str, float] | None = None, **more: float) -> dict[str, float]:
    """Every formula variable, 0 unless given."""
    env = dict.fromkeys(VARIABLES, 0)
    if values:
        env.update((k, v) for k, v in values.items() if k in env)
    env.update((k, v) for k, v in more.items() if k in env)
    return env


@dataclass(frozen=True)
class DefaultCase:
    case: str
    when: Formula
    config: tuple[tuple[str, Formula], ...]

    def evaluate(self, env: Mapping[str, float]) -> dict[str, int]:
        return {k: int(f(env)) for k, f in self.config}


def _cases(raw: Any, where: str) -> tuple[DefaultCase, ...]:
    if not isinstance(raw, list) or not raw:
        raise ProfileError(f"{where}: expected a non-empty list of default cases")
    out = []
    for i, item in enumerate(raw):
        w = f"{where}[{i}]"
        try:
            out.append(DefaultCase(str(item["case"]), Formula(item["when"], f"{w}.when"),
                                   tuple((k, Formula(v, f"{w}.config.{k}")) for k, v in item["config"].items())))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ProfileError(f"{w}: missing or malformed field {exc}") from None
    return tuple(out)


def first_case(cases: tuple[DefaultCase, ...], env: Mapping[str, float]) -> tuple[DefaultCase, dict[str, int]]:
    for case in cases:
        if case.when(env):
            return case, case.evaluate(env)
    raise ProfileError("no default case matched (the last case of a profile must be `when: 1`)")


@dataclass(frozen=True)
class TableRules:
    """How one engine finds one family of tables (fused MoE or block GEMM)."""

    raw: Mapping[str, Any]
    defaults: tuple[DefaultCase, ...]
    bk_raise: Formula | None = None  # block GEMM: BLOCK_SIZE_K as the loader adjusts it

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @property
    def env(self) -> str | None:
        return self.raw.get("env")

    @property
    def package_dir(self) -> str:
        return self.raw["package_dir"]

    @property
    def triton_folders(self) -> bool:
        return bool(self.raw.get("triton_folders"))

    @property
    def block_shape_format(self) -> str:
        return self.raw.get("block_shape_format", "[{bn}, {bk}]")


@dataclass(frozen=True)
class Profile:
    name: str
    engine: str
    version: str
    raw: Mapping[str, Any] = field(repr=False)
    moe: TableRules = field(repr=False)
    block_gemm: TableRules = field(repr=False)
    mla: Mapping[str, Any] = field(repr=False)
    mla_launch: tuple[tuple[str, Formula], ...] = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"

    @property
    def description(self) -> str:
        return self.raw.get("description", "")

    @property
    def notes(self) -> list[str]:
        return list(self.raw.get("notes", []))

    @property
    def aliases(self) -> list[str]:
        return list(self.raw.get("aliases", []))

    @property
    def batch_sizes(self) -> list[int]:
        return list(self.raw.get("batch_sizes", []))

    @property
    def shipped_index(self) -> str | None:
        return self.raw.get("shipped_index")

    @property
    def assumed_triton_version(self) -> str | None:
        return self.raw.get("assumed_triton_version")

    @property
    def spelling(self) -> str:
        return self.raw["device_name"]["spelling"]

    @property
    def marlin(self) -> Mapping[str, Any]:
        return self.raw.get("marlin") or {}

    def mla_params(self, env: Mapping[str, float]) -> dict[str, int]:
        return {k: int(f(env)) for k, f in self.mla_launch}


def profile_from_dict(data: Mapping, source: str) -> Profile:
    try:
        if data.get("format") != 1:
            raise ProfileError(f"{source}: unsupported profile format {data.get('format')!r}")
        engine = data["engine"]
        if engine not in ENGINES:
            raise ProfileError(f"{source}: unknown engine {engine!r}")
        moe = TableRules(data["moe"], _cases(data["moe"]["defaults"], f"{source}: moe.defaults"))
        raw_raise = data["block_gemm"].get("bk_raise")
        gemm = TableRules(data["block_gemm"], _cases(data["block_gemm"]["defaults"], f"{source}: block_gemm.defaults"),
                          Formula(raw_raise, f"{source}: block_gemm.bk_raise") if raw_raise else None)
        mla = data["mla_decode"]
        launch = tuple((k, Formula(v, f"{source}: mla_decode.launch.{k}")) for k, v in mla["launch"].items())
        return Profile(name=data["name"], engine=engine, version=str(data["version"]), raw=data, moe=moe,
                       block_gemm=gemm, mla=mla, mla_launch=launch)
    except (KeyError, TypeError) as exc:
        raise ProfileError(f"{source}: missing or malformed field {exc}") from None


@lru_cache(maxsize=None)
def load_profiles() -> tuple[Profile, ...]:
    """Every engine profile, formulas compiled and checked, sorted by engine then version."""
    return tuple(profile_from_dict(data, source) for source, data in raw_profiles())


def profile_names() -> list[str]:
    return [p.name for p in load_profiles()]


def find_profile(engine: str, version: str | None = None) -> tuple[Profile, str | None]:
    """The profile for ``engine`` at ``version`` (default: the newest), and a note when it is not
    an exact match (the newest profile at or below the version, else the oldest)."""
    engine = engine.lower()
    candidates = [p for p in load_profiles() if p.engine == engine]
    if not candidates:
        raise ProfileError(f"no profile for engine {engine!r}; known: {', '.join(profile_names())}")
    if version is None:
        return candidates[-1], None
    v = version.strip()
    for p in candidates:
        if v in (p.version, p.name) or v in p.aliases or f"{engine}-{v}" in p.aliases:
            return p, None
    if not any(versions.release(v)):
        raise ProfileError(f"unknown {engine} version {version!r}; profiles: "
                           + ", ".join(f"{p.name} ({', '.join(p.aliases)})" if p.aliases else p.name for p in candidates))
    want = versions.parse(v)
    older = [p for p in candidates if versions.parse(p.version) <= want]
    chosen = older[-1] if older else candidates[0]
    return chosen, (f"no profile for {engine} {v}; using {chosen.name}, the "
                    + ("newest profile at or below it" if older else "oldest profile"))
