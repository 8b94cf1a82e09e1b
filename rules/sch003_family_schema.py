"""SCH003: a table of another config family that does not match its schema."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from tilefit.cachedir import ValidityCache
from tilefit.families import OTHER_FAMILIES
from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


_VALID = ValidityCache("schemas", b"tilefit-family-schema-1")


@lru_cache(maxsize=None)
def _schema_bytes(family: str) -> bytes | None:
    try:
        return (resources.files("tilefit") / "data" / "schemas" / f"{family}.schema.json").read_bytes()
    except (FileNotFoundError, OSError):
        return None


@lru_cache(maxsize=None)
def _validator(family: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(_schema_bytes(family)))


@lru_cache(maxsize=None)
def _fast_check(family: str):
    """The schema's compiled validity test (:mod:`tilefit.device_db.fastschema`), None when it uses a
    keyword that test does not compile (then ``jsonschema`` alone decides)."""
    from tilefit.device_db.fastschema import Unsupported, compile_schema

    try:
        return compile_schema(json.loads(_schema_bytes(family)))
    except Unsupported:
        return None


class SCH003(Rule):
    """Table of another config family does not match its schema.

    ## What it does
    Validates the tables tilefit recognises but does not model (mamba selective-state-update,
    LoRA csgmv and plans, Helion, aiter, collective and MoE front-end tables, ...) against a
    JSON Schema of what the engine's loader accepts, and points at the offending value.

    ## Why is this bad?
    These loaders index and splat the values like the Triton launch tables do; a wrong type or
    a missing key fails at start-up or at the first call that needs the table.
    """

    code = "SCH003"
    name = "family-schema"
    severity = Severity.ERROR
    scope = Scope.FILE
    families = OTHER_FAMILIES
    examples = (
        Example("headdim=64,dstate=128,device_name=NVIDIA_H100_80GB_HBM3,cache_dtype=float16.json",
                '{"8": {"BLOCK_SIZE_M": "4", "num_warps": 1}}', True),
        Example("headdim=64,dstate=128,device_name=NVIDIA_H100_80GB_HBM3,cache_dtype=float16.json",
                '{"8": {"BLOCK_SIZE_M": 4, "num_warps": 1}}', False),
    )

    def check(self, ctx: FileContext):
        if ctx.table.doc is None:
            return
        schema = _schema_bytes(ctx.meta.family)
        if schema is None:
            return
        # Validating the large Helion tables takes tenths of a second: contents that passed
        # before are remembered by digest (see tilefit.cachedir).
        key = _VALID.digest(schema, ctx.table.data)
        if _VALID.is_valid(key):
            return
        fast = _fast_check(ctx.meta.family)
        if fast is not None and fast(ctx.table.value):  # valid: no jsonschema walk (a third of a cold check)
            _VALID.remember(key)
            return
        errors = 0
        for error in _validator(ctx.meta.family).iter_errors(ctx.table.value):
            errors += 1
            path = tuple(error.absolute_path)
            where = "/".join(str(p) for p in path) or "top level"
            yield Finding(f"{where}: {error.message}", at=path, identity=f"{where}:{error.validator}")
        if not errors:
            _VALID.remember(key)
