"""One entry's shared-memory need on one device class, and its verdict, for every entry (the rules
report only the offending ones).

The figure is the one SMEM001 judges: the worst kernel variant the entry feeds
(:func:`tilefit.variants.kernel_variants`), estimated by the run's own estimator with the class's
limit (so ``auto`` compiles exactly what it compiled for the check, and the estimator's memo
answers). The verdict follows SMEM001, EST001 and DEV002: over only when even the estimate's
error bound cannot bring it under the limit; not applicable when Triton cannot compile the
table's dtype for the arch (DEV002; the check then also reports the bytes as SMEM001, the page
shows the more basic fact). ``tests/test_audit.py`` holds the audit's overflows equal to the
check's SMEM001 diagnostics.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from tilefit.estimate import EstimatorUnavailable
from tilefit.serving.launch import arch_key as launch_arch_key
from tilefit.variants import dtype_path, kernel_variants

FITS, OVER, UNCERTAIN, NOT_APPLICABLE, UNCHECKED = "f", "o", "u", "n", "x"


class Need(NamedTuple):
    bytes: int | None
    verdict: str  # FITS, OVER, UNCERTAIN, NOT_APPLICABLE or UNCHECKED
    estimator: str | None = None  # "analytic" or "exact"


def dtype_supported(meta, device) -> bool:
    """DEV002's test: fp8 e4m3 tables need an arch whose Triton backend has fp8e4nv."""
    if dtype_path(meta) != "fp8_w8a8":
        return True
    supported = device.triton_fp8_dtypes
    return supported is None or "fp8e4nv" in supported


def entry_need(meta, entry: Mapping, device, estimator, variants=None) -> Need:
    """``variants``: the entry's kernel variants on ``device`` when the caller has them."""
    limit = device.smem_per_block_optin
    if not dtype_supported(meta, device):
        return Need(None, NOT_APPLICABLE)
    worst = None
    over = uncertain = unchecked = False
    if variants is None:
        variants = kernel_variants(meta, entry, device.arch, device.vendor, meta.engine)
    for variant in variants:
        try:
            est = estimator.estimate(variant.spec, device.arch, limit)
        except EstimatorUnavailable:
            unchecked = True
            continue
        if worst is None or est.shared_bytes > worst.shared_bytes:
            worst = est
        if not est.usable or limit is None:
            unchecked = True
        elif est.certainly_over(limit):
            over = True
        elif not est.certainly_fits(limit):
            uncertain = True
    if worst is None:
        return Need(None, UNCHECKED)
    # SMEM001 reports any variant that is surely over; EST001 any it could not decide
    verdict = OVER if over else UNCHECKED if unchecked else UNCERTAIN if uncertain else FITS
    return Need(worst.shared_bytes, verdict, worst.estimator)


def _store_keys():
    """(needstore.key_of, needstore.key_prefix), imported on the first ask (the store is
    imported only where a run has one; a function-level import ran on each of a warm html run's
    tens of thousands of asks)."""
    global _KEYS
    if _KEYS is None:
        from .needstore import key_of, key_prefix

        _KEYS = (key_of, key_prefix)
    return _KEYS


_KEYS = None


class NeedTable:
    """:func:`entry_need` for many (kernel, config, device class) triples, the kernel variants
    built once per (kernel, config, vendor, launch arch key): archs differ only by the engines'
    arch-dependent launch adjustments (:func:`tilefit.serving.launch.arch_key`, the key the
    engine memoises variants by)."""

    def __init__(self, estimator, store=None):
        """``store``: a :class:`tilefit.audit.needstore.NeedStore` of the run's key (verdicts of
        an earlier run with the same configuration), or None."""
        self.estimator = estimator
        self.store = store
        self._variants: dict[tuple, tuple] = {}
        self._meta_text: dict[int, tuple] = {}  # id(meta) -> (meta, its repr): the store's key part
        self._key_prefix: dict[tuple, tuple] = {}  # (id(meta), id(entry)) -> (meta, entry, needstore.key_prefix)

    def need(self, kernel_key, config_key, meta, entry: Mapping, device) -> Need:
        skey = None
        if self.store is not None:
            key_of, key_prefix = _store_keys()
            hit = self._meta_text.get(id(meta))
            if hit is None or hit[0] is not meta:
                hit = self._meta_text[id(meta)] = (meta, repr(meta))
            # the key's JSON up to the device, once per (table name, entry): an entry is judged on
            # every device class
            pk = (id(meta), id(entry))
            prefix = self._key_prefix.get(pk)
            if prefix is None or prefix[0] is not meta or prefix[1] is not entry:
                prefix = self._key_prefix[pk] = (meta, entry, key_prefix(hit[1], entry))
            skey = key_of(prefix[2], device.key)
            stored = self.store.get(skey) if skey is not None else None
            if stored is not None:
                return stored
        vkey = (kernel_key, config_key, device.vendor, launch_arch_key(device.arch))
        variants = self._variants.get(vkey)
        if variants is None:
            variants = self._variants[vkey] = kernel_variants(meta, entry, device.arch, device.vendor, meta.engine)
        need = entry_need(meta, entry, device, self.estimator, variants)
        if skey is not None:
            self.store.put(skey, need)
        return need
