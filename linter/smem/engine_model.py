"""The engines' kernels' shared-memory model: the calibrated forms of ``calibrate smem --engine``.

A spec that names an engine (``spec.engine``: the table's engine of record) is answered from the
forms fitted to and proven on that engine's own kernel (``kernels/<family>/smem/<engine>-<version>/
triton-<X.Y>.json``), for the Triton release the spec names (``spec.triton``: an SGLang table's
``triton_X_Y_Z`` folder) or the model's (the installed Triton). Per answer the estimate says
what it rests on (``Estimate.detail``): the engine's kernel and release, whether the form was
proven on held-out compiles of this arch, and -- for a release that reuses another's forms --
the probe that proved the bytes identical. Configs the engine's kernel does not compile for an
arch are facts of the same calibration (:meth:`EngineModel.compile_failure`).

Nothing here imports triton or torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Mapping, NamedTuple

from .. import versions
from ..formula import compile_formula
from ..kernels import registry
from ..kernels.spec import KernelSpec
from ..model import build_frozen
from .analytic import PER_ARCH

_DIR_PREFIXES = ("vllm-", "sglang-")


@dataclass(frozen=True)
class Answer:
    shared_bytes: int
    proven: bool
    detail: str
    max_error: int | None
    compiled: bool = False  # the calibration compiled this very point: its figure, not a form's


def _engine_dirs(kernel: str, engine: str) -> dict[str, list[Path]]:
    """``{engine version: [folders]}`` of the family's calibrated releases of ``engine``: the user
    data folder's before the package's (:mod:`tilefit.smem.engine_files`). Listed once per user
    data folder (a check asks thousands of times); :func:`forget` -- which a calibration's write
    calls -- lists again."""
    from ..userdata import model_folder
    from .engine_files import ENGINE_SMEM

    root = model_folder(ENGINE_SMEM)
    return _listed_dirs(kernel, engine, None if root is None else str(root))


@lru_cache(maxsize=None)
def _listed_dirs(kernel: str, engine: str, _root: str | None) -> dict[str, list[Path]]:
    from .engine_files import release_dirs

    return release_dirs(kernel, engine)


def engine_versions(kernel: str, engine: str) -> list[str]:
    return sorted(_engine_dirs(kernel, engine), key=versions.parse)


def triton_versions(kernel: str, engine: str, engine_version: str) -> list[str]:
    return list(_triton_versions(kernel, engine, engine_version, tuple(map(str, _engine_dirs(kernel, engine).get(
        engine_version, ())))))


@lru_cache(maxsize=None)
def _triton_versions(kernel: str, engine: str, engine_version: str, dirs: tuple[str, ...]) -> tuple[str, ...]:
    found = {p.name[len("triton-"):-len(".json")] for d in dirs for p in Path(d).glob("triton-*.json")}
    return tuple(sorted(found, key=versions.parse))


def pick_engine_version(kernel: str, engine: str, wanted: str | None) -> str | None:
    """The calibrated engine release for ``wanted`` (default: the engine profile's): itself, else
    the newest at or below it, else the oldest."""
    from ..userdata import model_folder
    from .engine_files import ENGINE_SMEM

    root = model_folder(ENGINE_SMEM)
    return _pick_engine_version(kernel, engine, wanted, None if root is None else str(root))


@lru_cache(maxsize=None)
def _pick_engine_version(kernel: str, engine: str, wanted: str | None, _root: str | None) -> str | None:
    have = engine_versions(kernel, engine)
    if not have:
        return None
    if wanted is None:
        from ..serving.profiles import find_profile

        try:
            wanted = find_profile(engine)[0].version
        except Exception:  # noqa: BLE001
            return have[-1]
    if wanted in have:
        return wanted
    older = [v for v in have if versions.parse(v) <= versions.parse(wanted)]
    return older[-1] if older else have[0]


def pick_triton(kernel: str, engine: str, engine_version: str, wanted: str | None) -> tuple[str | None, str | None]:
    """``(X.Y, note)``: the calibrated (or probe-reused) Triton release of the engine's forms for
    ``wanted``; the note says when it is not the release asked for (and so not proven for it)."""
    chain = triton_chain(kernel, engine, engine_version, wanted)
    return chain[0] if chain else (None, None)


def nearest_first(have, want: str, newer_first: bool = False) -> list[str]:
    """The releases of ``have`` other than ``want``, the nearest to it first; a tie: the lower
    (``newer_first``: the higher)."""
    w = versions.release(want, 2)

    def distance(v: str) -> tuple[int, int]:
        r = versions.release(v, 2)
        return (abs((r[0] - w[0]) * 100 + r[1] - w[1]), 0 if (r > w) == newer_first else 1)

    return sorted((v for v in have if v != want), key=distance)


def triton_chain(kernel: str, engine: str, engine_version: str, wanted: str | None) -> list[tuple[str, str | None]]:
    """The releases whose forms answer ``wanted``, in the order they are tried, each with its note:
    ``wanted``'s own file first (no note: a release of its own, or one whose probe proved another's
    forms give its bytes), then the others, nearest release first (a tie: the lower), each noted as
    not proven for ``wanted``. A group the first file lacks (its probe differed and no form was
    fitted for it) is answered by the next file that has it."""
    have = triton_versions(kernel, engine, engine_version)
    if not have:
        return []
    if wanted is None:
        return [(have[-1], None)]
    want = versions.major_minor(wanted)
    chain: list[tuple[str, str | None]] = [(want, None)] if want in have else []
    why = (f"no form of Triton {want}'s own for this path" if want in have else f"no calibration for Triton {want}")
    for pick in nearest_first(have, want):
        chain.append((pick, f"{why}: the forms of Triton {pick} are used, not proven for {want}"))
    return chain


def _borrowed_bound(max_error: int, forms: "KernelForms", wanted: str | None,
                    probed: "KernelForms | None" = None, own_error: int | None = None) -> str:
    """Why an answer borrowed from another release (``forms``) has the error bound it has: the
    bound is what is known of the borrowed release's form, nothing of it measures ``wanted`` --
    unless ``wanted``'s own probe (``probed``) compared the path and differed: the bound is then the
    largest difference that probe saw plus the borrowed form's own held-out error (``own_error``)."""
    if probed is not None:
        own = own_error or 0
        return (f"its error bound, {max_error} B, is the largest difference Triton {probed.triton}'s probe saw "
                f"from Triton {probed.reused_from} on this path ({max_error - own} B) plus Triton "
                f"{forms.triton}'s form's own ({own} B)")
    asked = f"Triton {versions.major_minor(wanted)}" if wanted else "the release asked for"
    return (f"its error bound, {max_error} B, is that of Triton {forms.triton}'s form (the release borrowed), "
            f"not a measure of {asked}")


def _max_difference(probed: Mapping | None) -> int | None:
    """A probe record's largest difference in bytes (``max_difference``); None when not recorded."""
    got = (probed or {}).get("max_difference")
    return int(got) if isinstance(got, (int, float)) else None


_MISSING = object()
_GROUPS: dict[tuple[str, str], str] = {}  # (arch or arch family, dtype key) -> "family/dtype"


@lru_cache(maxsize=None)
def _doc(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


class KernelForms:
    """One ``triton-X.Y.json`` of one engine release of one kernel family."""

    def __init__(self, kernel: str, engine: str, engine_version: str, triton: str):
        self.kernel, self.engine, self.engine_version, self.triton = kernel, engine, engine_version, triton
        from .engine_files import stored_dir

        self.path = stored_dir(kernel, engine, engine_version, triton) / f"triton-{triton}.json"
        # the file is read when first asked about (a spec's chain lists every release, the first
        # one answers), its forms compiled when first asked for: a check touches a few of hundreds
        self._forms: dict[tuple, tuple] = {}
        # the compiled points (``points-triton-X.Y.json``): its rows grouped by arch when a look-up
        # first needs them, each arch's rows decoded when a look-up on that arch first needs them
        self._rows: dict[str, list] | None = None
        self._point_paths: list = []
        self._compiled: dict[str, dict[tuple, int]] = {}
        self._rule_ok: dict[tuple, bool] = {}
        # the failures of an arch indexed (and its rule compiled) when a question first needs them
        self._fail_index: dict[tuple, str] = {}
        self._fail_rules: dict[tuple, tuple[str, object, str]] = {}
        self._fail_indexed: set[str] = set()

    @cached_property
    def doc(self) -> Mapping:
        return _doc(str(self.path))

    @cached_property
    def reused_from(self) -> str | None:
        return (self.doc.get("reused") or {}).get("from")

    @cached_property
    def reused_groups(self) -> Mapping:
        return (self.doc.get("reused") or {}).get("groups") or {}

    @cached_property
    def _texts(self) -> dict[tuple[str, str], str]:
        return {(family, dtype): text for family, per in (self.doc.get("formulas") or {}).items()
                for dtype, text in per.items()}

    @cached_property
    def failures(self) -> Mapping:
        return self.doc.get("failures") or {}

    def _index_failures(self, arch: str) -> None:
        self._fail_indexed.add(arch)
        for name, rec in (self.failures.get(arch) or {}).items():
            errors = rec.get("errors") or ["does not compile"]
            for row in rec.get("points", ()):
                *tile_ws, err = row
                self._fail_index[(arch, name, tuple(tile_ws))] = errors[err] if err < len(errors) else errors[0]
            if rec.get("rule"):
                self._fail_rules[(arch, name)] = (rec["rule"], compile_formula(rec["rule"], ("BM", "BN", "BK", "W", "S")),
                                                  errors[0])

    def compiled(self, arch: str, path_name: str, tile: tuple[int, ...], num_warps: int, num_stages: int) -> int | None:
        """The bytes of this point when the calibration compiled it (``points-triton-X.Y.json``):
        the engine's kernel's own figure, no form needed; None when it was not compiled (or did
        not compile)."""
        return self.compiled_on(arch).get((path_name, (*tile, num_warps, num_stages)))

    def compiled_on(self, arch: str) -> Mapping[tuple, int]:
        """``{(path name, (*tile, num_warps, num_stages)): shared bytes}`` of the points the
        calibration compiled on ``arch`` (the rows of other archs are not decoded)."""
        hit = self._compiled.get(arch)
        if hit is not None:
            return hit
        if self._rows is None:
            self._rows = {}
            pp = self.path.with_name(f"points-{self.path.name}")
            if pp.is_file():
                from .calibrate import Path as CPath

                doc = _doc(str(pp))
                self._point_paths = [CPath.from_json(p) for p in doc.get("paths", ())]
                for row in doc.get("points", ()):
                    self._rows.setdefault(str(row[1]), []).append(row)
        hit = self._compiled[arch] = {}
        rows = self._rows.get(arch)
        if rows:
            from .calibrate import decode_row

            paths = self._point_paths
            # per path: its name and tile columns (decode_row's reading of a row, without its Point)
            shapes = [(p.name, len(registry.get(p.kernel).point_columns)) for p in paths]
            for row in rows:
                i = row[0] if type(row) is list and len(row) >= 5 else None
                if type(i) is not int or not 0 <= i < len(paths) or len(row) < 5 + shapes[i][1]:
                    p, _rest = decode_row(paths, row)  # any other row as decode_row reads it (or its error)
                    if p.shared is not None:
                        hit[(p.path.name, (*p.tile, p.num_warps, p.num_stages))] = p.shared
                    continue
                name, ntile = shapes[i]
                shared = row[4 + ntile]
                if shared is not None:  # the key: (path name, (*tile, num_warps, num_stages))
                    hit[(name, tuple([int(x) for x in row[2:4 + ntile]]))] = int(shared)
        return hit

    @property
    def function(self) -> str:
        hit = self.__dict__.get("_function")
        if hit is None:  # asked on every answer: joined once
            kernels = (self.doc.get("provenance") or {}).get("kernels") or {}
            hit = self.__dict__["_function"] = ", ".join(sorted(kernels)) or self.kernel
        return hit

    def _group_of(self, where: str, dtype: str) -> str:
        key = (where, dtype)
        hit = _GROUPS.get(key)
        if hit is None:
            from .calibrate import ARCH_FAMILIES

            hit = _GROUPS[key] = f"{ARCH_FAMILIES.get(where, where)}/{dtype}"
        return hit

    def _reused(self, where: str, dtype: str) -> KernelForms | None:
        """The base release's forms when this release's probe proved them for ``where``'s group."""
        if not self.reused_from or self._group_of(where, dtype) not in self.reused_groups:
            return None
        return kernel_forms(self.kernel, self.engine, self.engine_version, self.reused_from)

    def form(self, family: str, dtype: str):
        base = self._reused(family, dtype)
        if base is not None:
            return base.form(family, dtype)
        key = (family, dtype)
        hit = self._forms.get(key)
        if hit is None:
            text = self._texts.get(key)
            if text is None:
                return None
            hit = self._forms[key] = (text, compile_formula(text, _variables()))
        return hit

    def proof(self, family: str, dtype: str, arch: str) -> Mapping | None:
        base = self._reused(family, dtype)
        if base is not None:
            return base.proof(family, dtype, arch)
        return ((self.doc.get("proofs") or {}).get(family) or {}).get(dtype, {}).get(arch)

    def reuse_note(self, family: str, dtype: str) -> str | None:
        g = self.reused_groups.get(f"{family}/{dtype}")
        if not g or not self.reused_from:
            return None
        return (f"forms of Triton {self.reused_from}: Triton {self.triton} gave identical bytes on a "
                f"{g.get('points')}-point probe ({', '.join(g.get('archs') or ()) or 'no arch'})")

    def reuses_on(self, family: str, dtype: str, arch: str) -> bool:
        """Whether this release's probe compared ``arch``'s points of the group it reuses (a
        reused form is proven only on the archs its probe covered)."""
        g = self.reused_groups.get(f"{family}/{dtype}")
        if not g or not self.reused_from:
            return True  # not reused: its own calibration's proofs decide
        archs = g.get("archs")
        return archs is None or arch in archs

    def arch_difference(self, family: str, dtype: str, arch: str) -> str | None:
        """The probe's figures on ``arch`` of a group this release reuses on other archs only (an
        extension's arch whose points did not prove the base release's bytes: ``not_reused_on``)."""
        g = ((self.reused_groups.get(f"{family}/{dtype}") or {}).get("not_reused_on") or {}).get(arch)
        if not g:
            return None
        gap = f", up to {g['max_difference']} B apart" if g.get("max_difference") else ""
        few = " (too few to prove)" if g.get("identical") == g.get("points") else ""
        fails = f", {g['do_not_compile']} not compiled" if g.get("do_not_compile") else ""
        return (f"Triton {self.triton}'s probe on {arch}: {g.get('identical')} of {g.get('points')} points identical "
                f"to Triton {self.reused_from}{gap}{few}{fails}")

    def arch_max_difference(self, family: str, dtype: str, arch: str) -> int | None:
        """The largest difference in bytes the probe saw on ``arch`` (an extension's ``not_reused_on``
        arch) between this release and the base release; None when the probe kept no such arch."""
        apart = (self.reused_groups.get(f"{family}/{dtype}") or {}).get("not_reused_on") or {}
        return _max_difference(apart.get(arch))

    def probe_max_difference(self, family: str, dtype: str) -> int | None:
        """The largest difference in bytes this release's probe saw on a group it does not reuse
        (``reused.differing``) between this release and the base release; None when the probe
        kept no such group or no figure of it."""
        return _max_difference(((self.doc.get("reused") or {}).get("differing") or {}).get(f"{family}/{dtype}"))

    def probe_difference(self, family: str, dtype: str) -> str | None:
        """The probe's figures of a group this release does not reuse and has no form for."""
        g = ((self.doc.get("reused") or {}).get("differing") or {}).get(f"{family}/{dtype}")
        if not g:
            return None
        gap = f", up to {g['max_difference']} B apart" if g.get("max_difference") else ""
        few = " (too few to prove)" if g.get("identical") == g.get("points") else ""
        return (f"Triton {self.triton}'s probe: {g.get('identical')} of {g.get('points')} points identical to "
                f"Triton {self.reused_from}{gap}{few}")

    def failure(self, arch: str, path_name: str, tile: tuple[int, ...], num_warps: int, num_stages: int,
                vars_: Mapping[str, int]) -> str | None:
        if arch not in self._fail_indexed:
            self._index_failures(arch)
        hit = self._fail_index.get((arch, path_name, (*tile, num_warps, num_stages)))
        if hit is not None:
            return hit
        rule = self._fail_rules.get((arch, path_name))
        if rule is not None and rule[1](**vars_) and self._rule_holds(arch, rule):
            return f"{rule[2]} (calibration rule: {rule[0]})"
        return None

    def _rule_holds(self, arch: str, rule) -> bool:
        """A failure rule is used only where no point the calibration compiled on ``arch`` -- of
        any dtype path of the kernel -- satisfies it (a rule drawn from few points can be broader
        than the failure: ``BN == BK`` where only 256-row tiles fail)."""
        key = (arch, rule[0])
        hit = self._rule_ok.get(key)
        if hit is None:
            hit = True
            for (_name, row) in self.compiled_on(arch):
                *t, w, st = row
                v = ({"BM": t[0], "BN": t[1], "BK": t[2]} if len(t) == 3 else {"BM": t[1], "BN": t[0], "BK": t[2]})
                if rule[1](**v, W=w, S=st):
                    hit = False
                    break
            self._rule_ok[key] = hit
        return hit


# a release that compiled none of at least this many points of an arch "cannot build" the kernel there
_UNBUILDABLE_MIN_FAILURES = 10


@lru_cache(maxsize=None)
def release_cannot_build(kernel: str, engine: str, triton: str, arch: str) -> str | None:
    """The compiler's words when Triton ``triton`` builds none of the engine's kernel on ``arch``:
    its calibration compiled none of its points there and recorded at least
    :data:`_UNBUILDABLE_MIN_FAILURES` failures (e.g. SGLang 0.5.23's fused MoE under Triton 3.4 on
    sm_90 and newer: its ``gdc_wait`` takes ``_builder`` where its code generator passes
    ``_semantic``). That is a fact of the release, not of any tile: this engine release does not
    run on that Triton there, and SGLang loads such a folder's table (its fallback across
    ``triton_X_Y_Z`` folders) under the Triton it runs with. A release without a calibration of
    its own cannot build it where it is older than the family's ``engine_min_triton`` for the
    arch (SGLang 0.5.23's fused MoE on sm_90+ under Triton 3.1-3.3: no ``gdc_wait``); the words
    are then that reason. None when the release builds it, or nothing says it does not."""
    ev = pick_engine_version(kernel, engine, None)
    if ev is None:
        return None
    if versions.major_minor(triton) not in triton_versions(kernel, engine, ev):
        need = registry.get(kernel).engine_min_triton(engine, arch)
        if need and versions.release(triton, 2) < versions.release(need[0], 2):
            return need[1]
        return None
    forms = kernel_forms(kernel, engine, ev, versions.major_minor(triton))
    per = forms.failures.get(arch) or {}
    failed = sum(len(rec.get("points", ())) for rec in per.values())
    if failed < _UNBUILDABLE_MIN_FAILURES:
        return None
    if forms.compiled_on(arch):
        return None
    errors = sorted({e for rec in per.values() for e in (rec.get("errors") or ())})
    return errors[0] if len(errors) == 1 else "; ".join(errors[:2])


@lru_cache(maxsize=None)
def _calibrate():
    """:mod:`tilefit.smem.calibrate`, imported when first needed (a function-level import on each
    of thousands of answers costs the import machinery's look-up every time)."""
    from . import calibrate

    return calibrate


@lru_cache(maxsize=None)
def _variables() -> tuple[str, ...]:
    from .analytic import VARIABLES

    return VARIABLES


@lru_cache(maxsize=None)
def kernel_forms(kernel: str, engine: str, engine_version: str, triton: str) -> KernelForms:
    return KernelForms(kernel, engine, engine_version, triton)


def forget() -> None:
    _listed_dirs.cache_clear()
    _triton_versions.cache_clear()
    _pick_engine_version.cache_clear()
    kernel_forms.cache_clear()
    release_cannot_build.cache_clear()
    _doc.cache_clear()


class EngineModel:
    """Answers for engine specs; ``triton``: the release asked for when a spec names none."""

    def __init__(self, triton: str | None = None, engine_versions_: Mapping[str, str] | None = None):
        self.triton = triton
        self.engine_versions = dict(engine_versions_ or {})
        self._memo: dict[tuple, object] = {}
        self._answers: dict[tuple, Answer | None] = {}
        self._failures: dict[tuple, str | None] = {}
        self._forms_found: dict[tuple, tuple | None] = {}
        self._bases: dict[str, object] = {}
        self._points: dict[KernelSpec, tuple | None] = {}
        self._moves: dict[tuple, tuple[str | None, str]] = {}  # see runnable()
        self._failure_forms: dict[tuple, KernelForms | None] = {}  # see compile_failure()
        self._answer_bases: dict[tuple, tuple] = {}  # see _plan_step()
        self._plans: dict[tuple, _AnswerPlan] = {}  # see _plan()
        self._plan_ids: dict[tuple, int] = {}  # see _plan_id()
        self._facts: dict[int, _SpecFacts] = {}  # KernelSpec.smem_id -> see _spec_facts()

    def forms_for(self, spec: KernelSpec) -> tuple[KernelForms | None, str | None]:
        """The first file of :meth:`forms_chain` (the release's own when it has one)."""
        chain = self.forms_chain(spec)
        return chain[0] if chain else (None, None)

    def forms_chain(self, spec: KernelSpec) -> list[tuple[KernelForms, str | None]]:
        key = (spec.kernel, spec.engine, spec.triton)
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        ev = pick_engine_version(spec.kernel, spec.engine, self.engine_versions.get(spec.engine))
        found: list = []
        if ev is not None:
            found = [(kernel_forms(spec.kernel, spec.engine, ev, tv), note)
                     for tv, note in triton_chain(spec.kernel, spec.engine, ev, spec.triton or self.triton)]
        self._memo[key] = found
        return found

    def _base_model(self, forms: KernelForms):
        """The analytic model whose variables (operand bytes, epilogue tables) the forms read: the
        release they were calibrated on."""
        version = forms.reused_from or forms.triton
        hit = self._bases.get(version)
        if hit is None:
            from .analytic import load_model

            hit = self._bases[version] = load_model(version)
        return hit

    def answer(self, spec: KernelSpec, arch: str, forms_only: bool = False) -> Answer | None:
        """The engine's kernel's bytes for ``spec`` on ``arch``: the calibration's compile of this
        very point when it made one, else the form (``forms_only``: the form, always -- what the
        proof test checks on the held-out points). A group the release's own file has no form for
        is answered by the next release of :meth:`forms_chain`, not proven, with the probe's
        figures of the difference. Memoised per :attr:`KernelSpec.smem_key` (specs that differ
        only in the launch-order group get one answer)."""
        sid = spec.smem_id
        key = (sid, arch, forms_only)
        out = self._answers.get(key, _MISSING)
        if out is not _MISSING:
            return out
        facts = self._facts.get(sid)
        if facts is None:
            facts = self._facts[sid] = self._spec_facts(spec)
        plan = self._plans.get((facts.plan_id, arch, forms_only))
        if plan is None:
            plan = self._plan(spec, arch, forms_only, facts.dtypes, facts.plan_id)
        out = self._answers[key] = self._planned(plan, facts, arch)
        return out

    def _spec_facts(self, spec: KernelSpec) -> "_SpecFacts":
        """What answers ``spec`` on every arch alike (see :class:`_SpecFacts`)."""
        ref = spec.reference
        dtypes = registry.get(spec.kernel).form_dtypes(ref)
        return _SpecFacts(ref, dtypes, self._plan_id(spec, dtypes), [_MISSING], {})

    def _plan_id(self, spec: KernelSpec, dtypes: tuple) -> int:
        """The number of (kernel, engine, release, dtype path): what a plan depends on besides the
        arch (interned once per spec, so that a plan's look-up hashes three small values)."""
        pkey = (spec.kernel, spec.engine, spec.triton, dtypes)
        return self._plan_ids.setdefault(pkey, len(self._plan_ids))

    def _plan(self, spec: KernelSpec, arch: str, forms_only: bool, dtypes: tuple, plan_id: int) -> "_AnswerPlan":
        """What answers ``spec`` on ``arch`` besides its tile: the releases tried in turn (each
        with its note, base model, arch family, form and texts, found when a tile first reaches
        it) and the notes of a release move. It depends on the kernel, engine, release, arch and
        dtype path only (``plan_id``: :meth:`_plan_id`), so the tens of thousands of answers of a
        check share a few hundred plans; :meth:`_planned` evaluates one for a tile."""
        pkey = (plan_id, arch, forms_only)
        plan = self._plans.get(pkey)
        if plan is None:
            judged, moved = self.runnable(spec, arch)
            if moved:
                inner = self._plan(judged, arch, forms_only, dtypes, self._plan_id(judged, dtypes))
                # steps of its own: its answers' details end with the moves' notes
                plan = _AnswerPlan(inner.spec, arch, forms_only, dtypes, inner.chain, [], inner.moves + (moved,))
            else:
                plan = _AnswerPlan(spec, arch, forms_only, dtypes, self.forms_chain(spec), [], ())
            self._plans[pkey] = plan
        return plan

    def _plan_step(self, plan: "_AnswerPlan", i: int) -> "_PlanStep | None":
        """Step ``i`` of ``plan`` (the chain's ``i``-th release), or None when the base model has no
        family for the arch (nothing answers there)."""
        spec, arch = plan.spec, plan.arch
        forms, note = plan.chain[i]
        own, own_note = plan.chain[0]
        differed = None
        if forms is not own and own_note is None:  # the release's own file lacks this group
            differed = own
            gap = self._difference(own, spec, arch)
            if gap:
                note = f"{note} ({gap})"
        akey = (forms, arch, spec.kernel)
        found_base = self._answer_bases.get(akey)
        if found_base is None:
            base = self._base_model(forms)
            family = base.family_of(arch)
            found_base = self._answer_bases[akey] = (base, family,
                                                     None if family is None else registry.get(spec.kernel))
        base, family, _fam = found_base
        if family is None:
            return None
        return _PlanStep(forms, note, base, family, differed, points_first=note is None and not plan.forms_only)

    def _planned(self, plan: "_AnswerPlan", facts: "_SpecFacts", arch: str) -> Answer | None:
        """``plan``'s answer for the tile of the spec whose facts are ``facts`` (see :meth:`_plan`)."""
        steps = plan.steps
        for i in range(len(plan.chain)):
            if i == len(steps):
                steps.append(self._plan_step(plan, i))
            step = steps[i]
            if step is None:
                continue
            forms = step.forms
            if step.points_first:
                pkey = facts.point_key[0]
                if pkey is _MISSING:
                    pt = self._point(facts.ref)
                    pkey = facts.point_key[0] = None if pt is None else (pt[0], (*pt[1], pt[2], pt[3]))
                if pkey is not None:
                    compiled = step.compiled
                    if compiled is None:  # the calibration's compiles on the arch (KernelForms.compiled)
                        compiled = step.compiled = forms.compiled_on(arch)
                    shared = compiled.get(pkey)
                    if shared:
                        detail = step.compiled_detail
                        if detail is None:
                            detail = step.compiled_detail = _with_moves(
                                f"{plan.spec.engine} {forms.engine_version} {forms.function}: compiled for "
                                f"{arch} by the calibration (Triton {forms.triton})", plan.moves)
                        return build_frozen(Answer, {"shared_bytes": shared, "proven": True, "detail": detail,
                                                     "max_error": None, "compiled": True})
            found = step.found
            if found is _MISSING:
                found = step.found = self._found_form(forms, step.note, plan.spec, arch, step.family, plan.dtypes,
                                                      step.differed)
                if found is not None and plan.moves:
                    found = step.found = (found[0], found[1], _with_moves(found[2], plan.moves), found[3])
            if found is None:
                continue
            fn, proven, detail, max_error = found
            base = step.base
            tiles = facts.tiles.get(base)
            if tiles is None:  # the tile's variables but the arch's epilogue scratch, once per base model
                tiles = facts.tiles[base] = base.tile_values(facts.ref)
            if tiles is PER_ARCH:
                value = fn(**base.variables(facts.ref, step.family, arch))
            else:
                values, question = tiles
                value = fn(*values) if question is None else fn(*values, base.epilogue.lookup(arch, step.family,
                                                                                              *question))
            return build_frozen(Answer, {"shared_bytes": int(round(value)), "proven": proven, "detail": detail,
                                         "max_error": max_error, "compiled": False})
        return None

    def _found_form(self, forms: KernelForms, note: str | None, spec: KernelSpec, arch: str, family: str,
                    dtypes: tuple, differed: KernelForms | None) -> tuple | None:
        """:meth:`_find_form`, memoised per (release, note, engine, arch, family, dtype path, differed)."""
        fkey = (forms, note, spec.engine, arch, family, dtypes, differed)
        try:
            return self._forms_found[fkey]
        except KeyError:
            pass
        found = self._forms_found[fkey] = self._find_form(forms, note, spec, arch, family, dtypes,
                                                          f"{spec.engine} {forms.engine_version} {forms.function}",
                                                          differed)
        return found

    def runnable(self, spec: KernelSpec, arch: str) -> tuple[KernelSpec, str | None]:
        """``spec`` under a Triton release that builds the engine's kernel on ``arch``, with a note
        when that is not the release ``spec`` names: an SGLang ``triton_X_Y_Z`` folder whose release
        cannot build the kernel there at all (:func:`release_cannot_build`) is read by the engine
        under the Triton it runs with, so the installed release (the model's) is judged instead."""
        if not (spec.engine and spec.triton and release_cannot_build(spec.kernel, spec.engine, spec.triton, arch)):
            return spec, None
        # where it moves depends on the kernel, engine, release and arch only: found once per such key
        # (every answer and failure look-up of a table in such a folder asks)
        mkey = (spec.kernel, spec.engine, spec.triton, arch)
        move = self._moves.get(mkey)
        if move is None:
            move = self._moves[mkey] = self._move(spec, arch)
        return spec.evolve(triton=move[0]), move[1]

    def _move(self, spec: KernelSpec, arch: str) -> tuple[str | None, str]:
        """(the release that builds the engine's kernel on ``arch`` in place of ``spec.triton``'s,
        None for the installed one; the note saying so)."""
        asked = versions.major_minor(spec.triton)
        ev = pick_engine_version(spec.kernel, spec.engine, self.engine_versions.get(spec.engine))
        because = ("no point of its calibration compiles there" if asked in triton_versions(spec.kernel, spec.engine, ev)
                   else release_cannot_build(spec.kernel, spec.engine, spec.triton, arch))
        why = f"Triton {asked} cannot build {spec.engine}'s kernel on {arch} ({because})"
        # the nearest release that builds it, a newer one first (the engine outgrew the old release)
        for tv in nearest_first(triton_versions(spec.kernel, spec.engine, ev), asked, newer_first=True):
            if not release_cannot_build(spec.kernel, spec.engine, tv, arch):
                return tv, f"{why}: judged with Triton {tv}, the nearest release that builds it"
        return None, f"{why}: judged with the installed Triton's forms"

    def _difference(self, own: KernelForms, spec: KernelSpec, arch: str) -> str | None:
        family = self._base_model(own).family_of(arch)
        if family is None:
            return None
        for dtype in registry.get(spec.kernel).form_dtypes(spec.reference):
            gap = own.probe_difference(family, dtype)
            if gap:
                return gap
        return None

    def _find_form(self, forms: KernelForms, note: str | None, spec: KernelSpec, arch: str, family: str,
                   dtypes: tuple, who: str, differed: KernelForms | None = None) -> tuple | None:
        """(form function, proven, detail, max error) of the first dtype path of ``dtypes`` with a
        form for ``arch`` (its own, else its family's); None when none has one. ``differed``: the
        release asked for, whose own file lacks the group (see :meth:`_plan_step`)."""
        for dtype in dtypes:
            where = arch  # a form of its own for this arch, else the arch family's
            hit = forms.form(arch, dtype)
            if hit is not None and forms._reused(arch, dtype) is not None and not forms.reuses_on(family, dtype, arch) \
                    and not forms.arch_difference(family, dtype, arch):
                hit = None  # another release's form of this arch, which the probe did not compare there
                # (compared and not proven -- an extension's not_reused_on -- it answers, not proven)
            if hit is None:
                where = family
                hit = forms.form(family, dtype)
            if hit is None:
                continue
            text, fn = hit
            proof = forms.proof(where, dtype, arch)
            proven_there = bool(proof) and proof.get("points", 0) > 0 and proof.get("exact") == proof.get("points") \
                and not proof.get("verdict_errors") and forms.reuses_on(family, dtype, arch)
            proven = proven_there and note is None  # a borrowed release's form is proven for that release only
            if proven:
                detail = f"{who}: form proven exact on {proof['points']} held-out compiles on {arch}"
            elif proven_there:
                detail = (f"{who}: form proven exact on {proof['points']} held-out compiles on {arch} for Triton "
                          f"{forms.triton}, the release borrowed")
            elif proof:
                detail = (f"{who}: form exact on {proof.get('exact')}/{proof.get('points')} held-out compiles on "
                          f"{arch} (not proven)")
            else:
                detail = f"{who}: form not proven on {arch} (no held-out compiles there)"
            reuse = forms.reuse_note(family, dtype)
            if reuse:
                detail += f"; {reuse}"
                apart = forms.arch_difference(family, dtype, arch)
                if apart:
                    detail += f"; {apart}"
            else:
                detail += f"; Triton {forms.triton}"
            if note:
                detail += f"; {note}"
            max_error = None if proven else (proof or {}).get("max_error")
            if not proven and reuse:
                # the base release's form on an arch where this release's probe differed: the form
                # is within its own held-out error of the base release, which is within the probe's
                # largest difference of this release there (the triangle bound: their sum)
                gap = forms.arch_max_difference(family, dtype, arch)
                if gap is not None:
                    max_error = (max_error or 0) + gap
            probed, own_error = None, max_error
            if differed is not None and max_error is not None:
                # the release asked for probed this path against its base release and differed (its
                # own file has no form for it): the borrowed form's bound -- its own held-out error,
                # 0 B say -- says nothing of that release; the probe's largest difference does
                gap = self._probe_gap(differed, family, dtype, dtypes)
                if gap:  # the form within its own error of its release, that within the probe's gap
                    probed, max_error = differed, max_error + gap
            if note and max_error is not None:
                detail += f"; {_borrowed_bound(max_error, forms, spec.triton or self.triton, probed, own_error)}"
            return fn, proven, detail, max_error
        return None

    @staticmethod
    def _probe_gap(differed: KernelForms, family: str, dtype: str, dtypes: tuple) -> int | None:
        """The largest difference ``differed``'s probe saw on the path answered (``dtype``), else on
        any other dtype path of the spec's (the release's own file has a form for none of them)."""
        gap = differed.probe_max_difference(family, dtype)
        if gap is not None:
            return gap
        gaps = [g for g in (differed.probe_max_difference(family, d) for d in dtypes) if g is not None]
        return max(gaps) if gaps else None

    def compile_failure(self, spec: KernelSpec, arch: str) -> str | None:
        """The compiler's words when the engine's kernel is known not to compile ``spec`` on ``arch``
        (a point of the calibration, or its failure rule for this arch and dtype path). Memoised per
        (spec, arch), as :meth:`answer` is: the fix planner asks for the same candidates again and
        again; per :attr:`KernelSpec.smem_key`, as :meth:`answer` is."""
        if not spec.engine:
            return None
        # whether the release judged has failures on ``arch`` at all depends on the kernel, engine,
        # release and arch only: most questions end there, before the per-spec memo below
        fkey = (spec.kernel, spec.engine, spec.triton, arch)
        forms = self._failure_forms.get(fkey, _MISSING)
        if forms is _MISSING:
            forms = self._failure_forms[fkey] = self._failing_release(spec, arch)
        if forms is None:
            return None
        key = (spec.smem_id, arch)
        out = self._failures.get(key, _MISSING)  # a look-up, not a KeyError: most questions are asked once
        if out is _MISSING:
            out = self._failures[key] = self._compile_failure(forms, spec, arch)
        return out

    def _failing_release(self, spec: KernelSpec, arch: str) -> KernelForms | None:
        """The forms of the release judged for ``spec`` on ``arch`` when its calibration recorded
        failures there; None when it recorded none (or the release is borrowed: failures are facts
        of the release they were compiled with)."""
        judged, _moved = self.runnable(spec, arch)
        forms, note = self.forms_for(judged)
        if forms is None or note is not None or not forms.failures.get(arch):
            return None
        return forms

    def _compile_failure(self, forms: KernelForms, spec: KernelSpec, arch: str) -> str | None:
        """The failure ``forms`` (the release judged, which has failures on ``arch``) records for
        ``spec``'s calibration point, or its failure rule's words; None otherwise."""
        pt = self._point(spec.reference)
        if pt is None:
            return None
        name, t, w, st = pt
        if len(t) == 3:
            vars_ = {"BM": t[0], "BN": t[1], "BK": t[2], "W": w, "S": st}
        else:
            vars_ = {"BM": t[1], "BN": t[0], "BK": t[2], "W": w, "S": st}
        if forms.compiled(arch, name, t, w, st):
            return None  # the calibration compiled this very point
        return forms.failure(arch, name, t, w, st, vars_)

    def _point(self, ref: KernelSpec) -> tuple | None:
        """``(path name, tile, num_warps, num_stages)`` of the calibration point a reference spec
        is (:func:`tilefit.smem.calibrate.spec_point_name`: it does not depend on the arch), or
        None; memoised per spec (an answer and a failure look-up ask for each)."""
        try:
            return self._points[ref]
        except KeyError:
            pass
        pt = _calibrate().spec_point_name(ref)
        out = self._points[ref] = None if pt is None else (pt[0], pt[1], ref.num_warps, ref.num_stages)
        return out


def _with_moves(detail: str, moves: tuple[str, ...]) -> str:
    """An answer's detail followed by the notes of the release moves that led to it."""
    for moved in moves:
        detail = f"{detail}; {moved}" if detail else moved
    return detail


class _SpecFacts(NamedTuple):
    """What answers a spec (one :attr:`KernelSpec.smem_key`) on every arch alike: its reference
    spec, the dtype paths its forms are tried on, the number of its plans' key (:meth:`EngineModel._plan_id`),
    ``[its calibration point's key in KernelForms.compiled_on]`` (None: not a point; found when a
    step first asks) and ``{base model: AnalyticModel.tile_values of the reference}``."""

    ref: KernelSpec
    dtypes: tuple
    plan_id: int
    point_key: list
    tiles: dict


class _PlanStep:
    """One release of a plan's chain (:meth:`EngineModel._plan_step`): its forms and note, the base
    model and arch family its forms read, the release asked for when its own file lacks the group
    (``differed``), whether the calibration's compiles answer first (``points_first``: the
    release's own forms, not the proof test's), and what is found when a tile first needs it: the
    compiles on the arch, their answers' detail, and the form (:meth:`EngineModel._found_form`,
    its detail with the plan's moves)."""

    __slots__ = ("forms", "note", "base", "family", "differed", "points_first", "compiled", "compiled_detail",
                 "found")

    def __init__(self, forms: KernelForms, note: str | None, base, family: str, differed: KernelForms | None,
                 points_first: bool):
        self.forms, self.note, self.base, self.family, self.differed = forms, note, base, family, differed
        self.points_first = points_first
        self.compiled: Mapping | None = None
        self.compiled_detail: str | None = None
        self.found = _MISSING


class _AnswerPlan(NamedTuple):
    """See :meth:`EngineModel._plan`: ``spec`` is the spec judged (after a release move), ``chain``
    its :meth:`EngineModel.forms_chain`, ``steps`` the chain's :class:`_PlanStep` found so far,
    ``moves`` the notes of the release moves, innermost first."""

    spec: KernelSpec
    arch: str
    forms_only: bool
    dtypes: tuple
    chain: list
    steps: list
    moves: tuple


@lru_cache(maxsize=None)
def load_engine_model(triton: str | None = None) -> EngineModel:
    return EngineModel(triton)
