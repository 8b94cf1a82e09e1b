"""KEY002: a key that occurs twice in the same object."""

from __future__ import annotations

from tilefit.jsonpos import Members
from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


class KEY002(Rule):
    """Key is duplicated in the same object.

    ## What it does
    Reports a batch-size key, or a launch parameter inside one entry, that occurs more than
    once in the same JSON object.

    ## Why is this bad?
    ``json.load`` silently keeps the last occurrence: the entry a reviewer reads first is not
    the one the engine launches. A linter that checked only one copy could also miss an
    overflow in the other.

    ## Example
    ```json
    {"16": {"BLOCK_SIZE_M": 16, ...}, "16": {"BLOCK_SIZE_M": 128, ...}}
    ```
    """

    code = "KEY002"
    name = "duplicate-key"
    severity = Severity.ERROR
    scope = Scope.FILE
    families = None
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"16": {}, "16": {}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"16": {"num_warps": 4, "num_warps": 8}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"16": {}, "32": {}}', False),
    )

    def check(self, ctx: FileContext):
        doc = ctx.table.doc
        if doc is None or not doc.has_duplicates:
            return
        yield from _duplicates(doc, doc.value, ())

def _duplicates(doc, value, pointer):
    if isinstance(value, Members):
        seen = set()
        for key, span in doc.members_in_order(pointer):
            if key in seen:
                where = f" in entry {pointer[-1]!r}" if pointer else ""
                yield Finding(f"key {key!r} is duplicated{where}; json.load keeps only the last value",
                              at=pointer + (key,), at_key=True, identity="/".join(map(str, pointer + (key,))))
            seen.add(key)
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(child, (dict, list)):
                yield from _duplicates(doc, child, pointer + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            if isinstance(child, (dict, list)):
                yield from _duplicates(doc, child, pointer + (i,))
