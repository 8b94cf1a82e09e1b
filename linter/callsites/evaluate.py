"""Shared memory of call sites: one compile per (kernel, launch values, dtype variant, arch).

A :class:`Case` is what a launch (or an autotune config with a launch) fixes: constexpr values,
literal arguments, options. :meth:`CallsiteEvaluator.run` turns a case, a dtype
:class:`Variant` and a device into an :class:`Outcome` (the bytes of shared memory per block,
or why there are none):

1. **Source.** (With ``--estimator analytic``, a kernel named like one of our reference
   kernels is estimated by its closed form first.) The kernel is taken out of its file into a scratch module
   (:func:`tilefit.pysource.extract.extract_kernel`, no user code runs). If that fails and
   ``allow_import`` is on, the user's module is imported instead. If neither works, a kernel
   with the name of one of our reference kernels is estimated by the analytic model; anything
   else is *unknown*, with the reason. Other kernels have no closed form, so they are compiled
   whenever Triton is installed, whatever ``--estimator`` says.
2. **Launch-like arguments.** Pointers get their variant's element type (16-byte aligned),
   ints a 16-divisible value, or 1 for the strides of contiguous dimensions
   (:mod:`tilefit.callsites.kernelinfo`, and ``x.stride(-1)`` at the launch), floats a float;
   literals at the launch win. Values go through Triton's own launch specialiser
   (:func:`tilefit.smem.exact.specialise`). ``@triton.heuristics`` are folded statically.
3. **Compile** for the device's arch with :func:`tilefit.smem.exact.compile_plan` (stops at the
   shared-memory allocation), through :class:`~tilefit.callsites.cache.ScratchCompileCache`.

Dtype variants come from ``[tool.tilefit.kernels."module:function"]`` (parameter name ->
list of dtypes for pointers, or of values for other parameters; ``"A,B"`` keys vary
parameters together), else a sweep of bf16/fp16/fp8e4nv over the data pointers. A variant a
device cannot run (fp8e4nv before sm_89) is *unsupported* there, not an error.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from tilefit.dtypes import TL_NAMES, triton_type

from .kernelinfo import KernelInfo, analyze
from .project import Project
from tilefit.pysource.scan import KernelDef
from .sites import AutotuneConfig, AutotuneSite, Instance, LaunchSite, heuristics_of
from tilefit.smem.archclass import compile_arch
from tilefit.variants import (CONFIG_NUM_STAGES, CONFIG_NUM_WARPS, DEFAULT_NUM_STAGES_CUDA, DEFAULT_NUM_STAGES_ROCM,
                              DEFAULT_NUM_WARPS)
from .speckey import arg_key
from .labels import label_capabilities, label_dtypes
from .values import DictVal, Frame, Lit, Ref, Unknown, Val, arch_capability, branches

SWEEP = ("bf16", "fp16", "fp8e4nv")
DEFAULT_INT = 4096  # a launch-like int: divisible by 16, fits i32

_UNSUPPORTED = ("not supported in this architecture", "is not supported on", "unsupported on this architecture")


@dataclass(frozen=True)
class TritonDType:
    """A ``tl.bfloat16``-like constexpr argument."""

    name: str


@dataclass(frozen=True)
class Variant:
    """Element types of the pointers and values of other parameters for one evaluation."""

    label: str
    dtypes: tuple[tuple[str, str], ...] = ()
    values: tuple[tuple[str, Any], ...] = ()
    explicit: bool = False  # from [tool.tilefit.kernels]
    error: str = ""  # the table entry cannot be used (unknown dtype, unknown parameter)

    def dtype_of(self, name: str) -> str | None:
        for k, v in self.dtypes:
            if k == name:
                return v
        return None


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | unsupported | failed | unknown
    shared: int | None = None
    estimator: str = ""  # exact | import | analytic
    detail: str = ""
    num_warps: int | None = None
    num_stages: int | None = None
    bound: tuple[str, ...] = ()  # the [tool.tilefit.kernels] values used (tilefit.callsites.kerneltable.notes)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Case:
    """What one launch (or autotune config) fixes, without dtype variant and device."""

    kernel: KernelDef
    label: str = ""
    given: dict[str, Any] = field(default_factory=dict)  # parameter -> Python value
    reasons: dict[str, str] = field(default_factory=dict)  # parameter -> why its value is unknown
    options: dict[str, Any] = field(default_factory=dict)  # num_warps, num_stages, ...
    option_reasons: dict[str, str] = field(default_factory=dict)
    hints: dict[str, int] = field(default_factory=dict)  # launch-site facts: stride(-1) -> 1
    literals: dict[str, Lit] = field(default_factory=dict)  # parameter/option -> its literal (for fixes)
    tried: frozenset = frozenset()  # names the fix search set: a [tool.tilefit.kernels] value does not override them
    passed: dict[str, str] = field(default_factory=dict)  # parameter -> the name the launch passes it (`kv=key_cache`)
    viewed: dict[str, str] = field(default_factory=dict)  # pointer -> the element type a `.view(torch.uint8)` gives it
    # an autotune config's launch: triton.Config's defaults (tilefit.variants.CONFIG_*) fill what it omits
    from_config: bool = False

    def with_value(self, name: str, value: Any) -> "Case":
        from .sites import is_option

        if is_option(self.kernel, name):
            return replace(self, options={**self.options, name: value}, tried=self.tried | {name})
        return replace(self, given={**self.given, name: value}, tried=self.tried | {name})

    def value(self, name: str) -> Any:
        from .sites import is_option

        return self.options.get(name) if is_option(self.kernel, name) else self.given.get(name)


def _off_target(case: Case, arch: str) -> Outcome | None:
    """``unsupported`` when ``case`` is the branch of a per-target answer that ``arch`` does not
    give (the ``launch_pdl=True`` instance of ``is_arch_support_pdl()`` on sm_86): that launch is
    not made there, so it is no verdict (as a dtype the device lacks is not)."""
    caps = label_capabilities(case.label) if case.label else None
    if caps is None:
        return None
    cap = arch_capability(arch)
    if cap is not None and cap in caps:
        return None
    return Outcome("unsupported", detail=f"this branch runs on compute capability {'/'.join(map(str, sorted(caps)))} "
                                         f"only, not on {arch}")


def _python_value(v: Val) -> tuple[bool, Any]:
    if isinstance(v, Lit):
        return True, v.value
    if isinstance(v, Ref) and v.kind == "triton":
        short = str(v.target).rsplit(".", 1)[-1]
        if short in TL_NAMES:
            return True, TritonDType(TL_NAMES[short])
    return False, None


def _stride_hint(expr: ast.expr | None) -> int | None:
    """``x.stride(-1)`` at the launch: the last stride of a (contiguous) tensor is 1."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "stride" \
            and len(expr.args) == 1:
        a = expr.args[0]
        if isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) and isinstance(a.operand, ast.Constant) \
                and a.operand.value == 1:
            return 1
    return None


def _take(values: Mapping, into: dict, reasons: dict, literals: dict) -> None:
    """Static values of ``values`` into ``into`` (literals also into ``literals``); why the
    others are not static into ``reasons``. A static value clears an earlier reason."""
    for name, v in values.items():
        ok, py = _python_value(v)
        if ok:
            into[name] = py
            reasons.pop(name, None)
            if isinstance(v, Lit):
                literals[name] = v
        else:
            reasons[name] = v.reason if isinstance(v, Unknown) else f"{name} is not a static value"


def case_from(kernel: KernelDef, inst: Instance, arg_exprs: Mapping[str, ast.expr] | None = None,
              config: AutotuneConfig | None = None) -> Case:
    case = Case(kernel, inst.label)
    _take(inst.args, case.given, case.reasons, case.literals)
    _take(inst.options, case.options, case.option_reasons, case.literals)
    for name, expr in (arg_exprs or {}).items():
        hint = _stride_hint(expr)
        if hint is not None:
            case.hints[name] = hint
        if isinstance(expr, ast.Name):
            case.passed[name] = expr.id
        viewed = _viewed_dtype(expr)
        if viewed is not None:
            case.viewed[name] = viewed
            if isinstance(expr.func.value, ast.Name):  # the variant's dtype of the viewed tensor still says which it is
                case.passed[name] = expr.func.value.id
    if config is not None:
        # an autotune config's values override the launch's; its options replace them
        case.label = ", ".join(x for x in (config.label, inst.label) if x)
        _take(config.kwargs, case.given, case.reasons, case.literals)
        case.options = {}
        case.option_reasons = {}
        case.from_config = True
        _take(config.options, case.options, case.option_reasons, case.literals)
    return case


def _viewed_dtype(expr: ast.expr | None) -> str | None:
    """The element type ``x.view(torch.uint8)`` passes (a reinterpreting view: whatever ``x``
    holds, the kernel gets bytes), else None."""
    from tilefit.dtypes import ALIASES, ELEMENT_BYTES

    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "view" \
            and len(expr.args) == 1 and not expr.keywords and isinstance(expr.args[0], ast.Attribute) \
            and isinstance(expr.args[0].value, ast.Name) and expr.args[0].value.id == "torch":
        dt = ALIASES.get(expr.args[0].attr)
        return dt if dt in ELEMENT_BYTES else None
    return None


def launch_cases(site: LaunchSite) -> list[Case]:
    return [case_from(site.kernel, inst, site.arg_exprs) for inst in site.instances]


def config_cases(site: AutotuneSite, config: AutotuneConfig) -> list[Case]:
    """A config with each launch of the kernel (its other constexprs), or alone."""
    if not site.launches:
        return [case_from(site.kernel, Instance("", {}, {}), None, config)]
    out = []
    seen = set()
    for launch in site.launches:
        for inst in launch.instances:
            case = case_from(site.kernel, inst, launch.arg_exprs, config)
            key = repr(sorted((k, repr(v)) for k, v in case.given.items()))
            if key not in seen:
                seen.add(key)
                out.append(case)
    return out


# ----------------------------------------------------------------------------------------------
# the kernels table


def normalise_dtype(name: str) -> str:
    return triton_type(name)


def table_for(table: Mapping[str, Mapping[str, Any]], kernel: KernelDef) -> Mapping[str, Any] | None:
    """The ``[tool.tilefit.kernels]`` entry of ``kernel``: ``"pkg.mod:fn"`` matches the module by
    its full dotted name or a trailing part of it (``"mod:fn"``), or by its file path."""
    best = None
    for key, entry in table.items():
        mod, _, fn = key.rpartition(":")
        if fn != kernel.name:
            continue
        name = kernel.module.name
        path = kernel.module.path.replace(os.sep, "/")
        if mod in ("", "*") or name == mod or name.endswith("." + mod) or \
                mod.endswith(".py") and (path == mod or path.endswith("/" + mod.lstrip("./"))):
            if best is None or len(mod) > len(best[0]):
                best = (mod, entry)
    return best[1] if best else None


def kernel_variants(kernel: KernelDef, info: KernelInfo, table: Mapping[str, Any] | None,
                    aliases: Mapping[str, set] | None = None) -> list[Variant]:
    data = info.data_pointers
    if not table:
        if not data:
            return [Variant("")]
        shown = ",".join(data[:3]) + (",\u2026" if len(data) > 3 else "")
        return [Variant(f"{shown}={dt}", tuple((p, dt) for p in data)) for dt in SWEEP]
    from .kerneltable import variants

    return variants(kernel, info, table, aliases)


def default_dtype(role: str, variant: Variant, info: KernelInfo) -> str:
    """The element type of a pointer the variant does not name: int32 for index tensors, fp32
    for scales; data and outputs follow the sweep's dtype (outputs of an fp8 sweep are bf16),
    and are bf16 beside a [tool.tilefit.kernels] table."""
    if role == "index":
        return "i32"
    if role == "scale":
        return "fp32"
    if variant.explicit:
        return "bf16"
    data = [variant.dtype_of(p) for p in info.data_pointers if variant.dtype_of(p)]
    first = data[0] if data else "bf16"
    if role == "output":
        return first if first in ("fp16", "bf16", "fp32") else "bf16"
    return first


# ----------------------------------------------------------------------------------------------
# sources of a compile


@dataclass(frozen=True)
class Source:
    kind: str  # scratch | import | none
    module: str | None = None  # importable module name holding the JITFunction
    function: str | None = None
    hash: str | None = None  # cache key part
    reason: str = ""
    scratch: Any = None


@dataclass(frozen=True)
class CompileJob:
    """One compile of a scratch (or imported) kernel: what :meth:`CallsiteEvaluator.job` gives."""

    src: Source
    case: Case
    args: tuple
    num_warps: int
    num_stages: int
    options: tuple
    arch: str
    key: str  # the plan's cache key (JSON text)
    bound: tuple[str, ...] = ()  # Outcome.bound
    compile_arch: str = ""  # the arch compiled for ``arch`` (tilefit.smem.archclass), "" = arch

    @property
    def target(self) -> str:
        """The arch the compile runs for and its result is kept under: the first arch of
        ``arch``'s class where one compile answers the class (:mod:`tilefit.smem.archclass`)."""
        return self.compile_arch or self.arch

    @property
    def identity(self) -> tuple:
        """Equal for launches with the same specialisation of the same kernel source, on archs
        that compile alike."""
        return (self.src.hash or (self.src.module, self.src.function), self.key, self.target)


class CallsiteEvaluator:
    """Evaluates cases against devices; memoises outcomes, extractions and kernel analyses."""

    def __init__(self, project: Project, *, kernels: Mapping[str, Mapping[str, Any]] | None = None,
                 mode: str = "auto", allow_import: bool = False, estimator=None, cache=None,
                 triton: bool | None = None, scenarios=()):
        self.project = project
        self.kernels = dict(kernels or {})
        self.scenarios = tuple(scenarios)  # tilefit.callsites.scenarios.Scenario: dtypes of pointers
        self.mode = mode
        self.allow_import = allow_import
        self.estimator = estimator  # tilefit.estimate.Estimator, for the analytic fallback
        if triton is None:
            from tilefit import versions

            triton = versions.installed_triton() is not None
        self.triton = triton
        if cache is None and triton:
            from tilefit.cachedir import cache_root

            root = cache_root()
            if root is not None:
                from .cache import ScratchCompileCache

                cache = ScratchCompileCache(root)
        self.cache = cache
        self._sources: dict[int, Source] = {}
        self._variants: dict[int, list[Variant]] = {}
        self._memo: dict[tuple, Outcome] = {}
        # one object per distinct frozen dict and per distinct outcome (a case is asked for under
        # each dtype variant and target, and built again by each reader: the same values each time)
        self._frozen: dict[tuple, tuple] = {}
        self._outcomes: dict[Outcome, Outcome] = {}
        self._results: dict[tuple, Any] = {}  # CompileJob.identity -> ExactResult of this run
        self.aliases: dict[int, dict[str, set]] = {}  # id(kernel) -> names launches pass -> parameters
        self._lock = threading.RLock()
        self.compiles = 0
        self.compile_seconds = 0.0

    def triton_version(self) -> str | None:
        """The Triton release the compiles are made with (the arch classes are per release)."""
        version = getattr(self, "_version", _MISSING)
        if version is _MISSING:
            from tilefit.smem.interpreter import compile_triton_version

            version = self._version = compile_triton_version()
        return version

    # -- per kernel --------------------------------------------------------------------------
    def info(self, kernel: KernelDef) -> KernelInfo:
        return analyze(kernel, self._helper)

    def _helper(self, fn, func_expr) -> KernelDef | None:
        if not isinstance(func_expr, ast.Name):
            return None
        module = self._module_of(fn)
        if module is None:
            return None
        v = self.project.evaluator.global_name(module, func_expr.id)
        for _, x in branches(v):
            if isinstance(x, Ref) and x.kind == "kernel":
                return x.target
        return None

    def _module_of(self, fn):
        modules = self.project.all_modules()
        cache = getattr(self, "_owner", None)
        if cache is None or self._owner_size != len(modules):  # modules loaded on demand since
            cache = self._owner = {}
            self._owner_size = len(modules)
            for m in modules:
                for k in m.all_kernels:
                    cache[id(k.node)] = m
        return cache.get(id(fn))

    def register_sites(self, sites) -> None:
        """The launch sites of the run: names their launches pass may key a kernel's table."""
        from .kerneltable import aliases_of

        self.aliases = aliases_of(sites.launches)
        self._variants.clear()

    def variants(self, kernel: KernelDef) -> list[Variant]:
        key = id(kernel)
        hit = self._variants.get(key)
        if hit is None:
            hit = kernel_variants(kernel, self.info(kernel), self.table(kernel), self.aliases.get(id(kernel)))
            self._variants[key] = hit
        return hit

    def user_table(self, kernel: KernelDef):
        """The kernel's ``[tool.tilefit.kernels]`` entry, or None."""
        return table_for(self.kernels, kernel)

    def table(self, kernel: KernelDef):
        """The kernel's ``[tool.tilefit.kernels]`` entry; without one, the dtypes the scenarios
        give its pointer parameters (``k_buffer,v_buffer`` -> bf16, fp8e4nv), if any."""
        table = table_for(self.kernels, kernel)
        if table is not None or not self.scenarios:
            return table
        merged: dict[str, list] = {}
        pointers = list(self.info(kernel).pointers)
        for s in self.scenarios:
            for names, dts in s.table_for(pointers).items():
                have = merged.setdefault(names, [])
                have.extend(d for d in dts if d not in have)
        return merged or None

    def source(self, kernel: KernelDef) -> Source:
        key = id(kernel)
        hit = self._sources.get(key)
        if hit is not None:
            return hit
        from tilefit.pysource.extract import ExtractError, extract_kernel

        try:
            scratch = extract_kernel(kernel.module.path, kernel.name, modules=self._module_for_path)
            src = Source("scratch", scratch.name, kernel.name, scratch.hash, scratch=scratch)
        except ExtractError as exc:
            reason = exc.reason + (f" (line {exc.line})" if exc.line else "")
            if os.path.abspath(exc.path) != os.path.abspath(kernel.module.path):
                reason += f" in {exc.path}"
            src = Source("none", reason=reason)
            if self.allow_import:
                src = self._import_source(kernel, reason)
        self._sources[key] = src
        return src

    def _module_for_path(self, path: str):
        m = self.project.by_path.get(os.path.abspath(path))
        if m is not None:
            return m
        from tilefit.pysource.extract import _load_module

        return _load_module(path)

    def _import_source(self, kernel: KernelDef, why: str) -> Source:
        """--allow-import: import the user's module (its code runs) and take the JITFunction."""
        from tilefit.pysource.extract import _package_root

        path = os.path.abspath(kernel.module.path)
        root = _package_root(path)
        name = kernel.module.name
        try:
            if root not in sys.path:
                sys.path.insert(0, root)
            mod = importlib.import_module(name)
            fn = getattr(mod, kernel.name)
            import triton

            seen = 0
            while not isinstance(fn, triton.runtime.JITFunction) and hasattr(fn, "fn") and seen < 8:
                fn = fn.fn
                seen += 1
            if not isinstance(fn, triton.runtime.JITFunction):
                return Source("none", reason=f"{why}; importing {name} gave no JITFunction for {kernel.name}")
        except Exception as exc:  # noqa: BLE001 - the user's module may fail in any way
            return Source("none", reason=f"{why}; importing {name} failed: {type(exc).__name__}: {exc}")
        # the imported module's source may change between runs: do not cache on disk. The compile
        # child imports the module itself (its code runs there too: --allow-import said so).
        return Source("import", name, kernel.name, None, reason=why, scratch=("import", root, name))

    # -- one evaluation ----------------------------------------------------------------------
    def run(self, case: Case, variant: Variant, device) -> Outcome:
        arch = device.arch
        off = _off_target(case, arch)  # before the memo: its key has the values, not the label
        if off is not None:
            return off
        key = (id(case.kernel), _freeze(case.given), _freeze(case.options), _freeze(case.hints), variant, arch,
               tuple(sorted(case.reasons)), tuple(sorted(case.option_reasons)), case.tried)
        with self._lock:
            hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = _swept_dtype(self._run(case, variant, device), variant)
        with self._lock:
            frozen = self._frozen
            key = (key[0], *(frozen.setdefault(part, part) for part in key[1:4]), *key[4:])
            out = self._outcomes.setdefault(out, out)
            self._memo[key] = out
        return out

    def _run(self, case: Case, variant: Variant, device) -> Outcome:
        job = self.job(case, variant, device)
        if isinstance(job, Outcome):
            return job
        return self._compile(job)

    def job(self, case: Case, variant: Variant, device) -> "Outcome | CompileJob":
        """The compile that :meth:`run` would do for ``case``, ``variant`` and ``device``, or the
        :class:`Outcome` it gives without one (a missing value, an unsupported dtype, the
        analytic model). Nothing is compiled: :func:`tilefit.callsites.prefetch.prefetch` runs
        the jobs of many sites in a pool of compile children before the rules ask."""
        kernel = case.kernel
        arch = device.arch
        off = _off_target(case, arch) or self._off_dtype(case, variant)
        if off is not None:
            return off
        if variant.error:
            return Outcome("unknown", detail=variant.error)
        fp8 = device.triton_fp8_dtypes
        for name, dt in variant.dtypes:
            if dt.startswith("fp8") and fp8 is not None and dt not in fp8:
                return Outcome("unsupported", detail=f"{dt} is not a Triton fp8 type on {arch}")
        built = self.plan(case, variant, arch)
        from .kerneltable import notes

        bound = notes(case, variant) if variant.values else ()
        if isinstance(built, Outcome):
            return replace(built, bound=bound) if bound else built
        args, num_warps, num_stages, options = built
        # Our reference kernels have closed forms: --estimator analytic uses them. Any other
        # kernel has none, so it is compiled whenever Triton is installed, whatever the mode.
        if self.mode == "analytic":
            known = self._known(case, variant, device, num_warps, num_stages)
            if known is not None:
                return replace(known, bound=bound)
        use_exact = self.triton
        if use_exact:
            src = self.source(kernel)
            if src.kind != "none":
                # keyed by what Triton's specialiser makes of each argument (tilefit.callsites.speckey):
                # launches that differ only in an int's value of the same class compile once
                key = json.dumps([src.function, [(a.name, a.kind, _jsonable(arg_key(a.kind, a.value))) for a in args],
                                  num_warps, num_stages, [(k, _jsonable(v)) for k, v in options]], sort_keys=False)
                text = src.scratch.source if src.kind == "scratch" else None
                target = compile_arch(arch, self.triton_version(), key, text)
                return CompileJob(src, case, tuple(args), num_warps, num_stages, options, arch, key, bound,
                                  "" if target == arch else target)
            reason = src.reason
        else:
            reason = "Triton is not installed (pip install 'tilefit[triton]')"
        known = self._known(case, variant, device, num_warps, num_stages)
        if known is not None:
            return replace(known, bound=bound)
        hint = "" if self.allow_import or not use_exact else "; --allow-import imports the module instead"
        return Outcome("unknown", detail=f"{reason}{hint}", bound=bound)

    def _off_dtype(self, case: Case, variant: Variant) -> Outcome | None:
        """``unsupported`` when ``case`` is the arm of a tensor's element type (``element type of
        key_cache: fp8e4nv``, a value such as ``x = 16 // element size``) and ``variant`` passes
        that tensor's pointer with another element size: that launch is not made."""
        wanted = label_dtypes(case.label) if case.label else {}
        if not wanted or not case.passed:
            return None
        from tilefit.dtypes import ELEMENT_BYTES

        info = self.info(case.kernel)
        for param, tensor in case.passed.items():
            dt = wanted.get(tensor)
            if dt is None or param not in info.pointers:
                continue
            got = variant.dtype_of(param) or default_dtype(info.pointers[param], variant, info)
            if ELEMENT_BYTES.get(got) != ELEMENT_BYTES.get(dt):
                return Outcome("unsupported", detail=f"this arm is for a {dt} {tensor}; the variant passes {got}")
        return None

    def plan(self, case: Case, variant: Variant, arch: str):
        """``(args, num_warps, num_stages, options)`` of the launch-like compile, or an
        :class:`Outcome` saying which values are missing."""
        from tilefit.kernels.plan import BACKEND_OPTIONS, Arg

        kernel = case.kernel
        info = self.info(kernel)
        from .sites import is_option

        # a [tool.tilefit.kernels] value overrides the launch's (a caller's default, a literal,
        # a run-time value), except where the fix search set one (case.tried)
        table_values = {k: v for k, v in variant.values if k not in case.tried}
        given = {**case.given, **{k: v for k, v in table_values.items() if not is_option(kernel, k)}}
        args: list[Arg] = []
        missing: list[str] = []
        heur = heuristics_of(self.project, kernel)
        pending: list[str] = []
        for p in kernel.params:
            name = p.name
            if name in given:
                value = given[name]
            elif name in heur:
                pending.append(name)
                continue
            elif p.default is not None and p.constexpr:
                continue  # Triton uses the signature's default
            elif p.constexpr:
                why = case.reasons.get(name, "not passed at the launch")
                missing.append(f"{name} ({why})")
                continue
            else:
                value = _MISSING
            if p.constexpr:
                if isinstance(value, TritonDType):
                    args.append(Arg(name, "dtype", value.name))
                else:
                    args.append(Arg(name, "constexpr", value))
                continue
            if name in info.pointers:
                lit = case.literals.get(name)
                if value is None and not (lit is not None and lit.via.startswith("default of")):
                    args.append(Arg(name, "none"))
                else:
                    dt = case.viewed.get(name) or variant.dtype_of(name) or \
                        default_dtype(info.pointers[name], variant, info)
                    args.append(Arg(name, "ptr", dt))
                continue
            if value is _MISSING:
                if p.default is not None:
                    continue
                if name in info.floats:
                    args.append(Arg(name, "float", 0.5))
                elif case.hints.get(name) == 1 or name in info.unit_strides:
                    args.append(Arg(name, "int", 1))
                else:
                    args.append(Arg(name, "int", DEFAULT_INT))
            elif value is None:
                args.append(Arg(name, "none"))
            elif isinstance(value, bool):
                args.append(Arg(name, "bool", value))
            elif isinstance(value, int):
                args.append(Arg(name, "int", value))
            elif isinstance(value, float):
                args.append(Arg(name, "float", value))
            elif isinstance(value, TritonDType):
                args.append(Arg(name, "dtype", value.name))
            else:
                missing.append(f"{name} (passed {value!r}, not a number)")
        if pending:
            known = {a.name: a for a in args}
            for name in pending:
                value, why = self._heuristic(kernel, heur[name], known, given)
                if why:
                    missing.append(f"{name} (@triton.heuristics: {why})")
                else:
                    a = Arg(name, "constexpr", value)
                    args.append(a)
                    known[name] = a
        if missing:
            return Outcome("unknown", detail="no static value for " + _grouped(missing))
        from tilefit.smem.exact import parse_arch

        try:
            backend, _, _ = parse_arch(arch)
        except Exception as exc:  # noqa: BLE001
            return Outcome("unsupported", detail=str(exc))
        opts = {**case.options, **{k: v for k, v in table_values.items() if is_option(kernel, k)}}
        bad = [f"{k} ({case.option_reasons[k]})" for k in ("num_warps", "num_stages")
               if k in case.option_reasons and k not in table_values]
        if bad:
            return Outcome("unknown", detail="no static value for " + ", ".join(bad))
        if case.from_config:
            num_warps = opts.get("num_warps", CONFIG_NUM_WARPS)
            num_stages = opts.get("num_stages", CONFIG_NUM_STAGES)
        else:
            num_warps = opts.get("num_warps", DEFAULT_NUM_WARPS)
            num_stages = opts.get("num_stages", DEFAULT_NUM_STAGES_ROCM if backend == "hip" else DEFAULT_NUM_STAGES_CUDA)
        if not isinstance(num_warps, int) or not isinstance(num_stages, int):
            return Outcome("unknown", detail=f"num_warps={num_warps!r} num_stages={num_stages!r} are not ints")
        options = tuple(sorted((k, v) for k, v in opts.items() if k in BACKEND_OPTIONS and v is not None))
        order = {p.name: p.index for p in kernel.params}
        args.sort(key=lambda a: order.get(a.name, 1 << 30))
        return args, num_warps, num_stages, options

    def _heuristic(self, kernel: KernelDef, node, known: dict, given: dict) -> tuple[Any, str]:
        if not isinstance(node, ast.Lambda) or len(node.args.args) != 1:
            return None, "not a one-argument lambda"
        items = []
        for name, a in known.items():
            if a.kind in ("int", "float", "bool", "constexpr"):
                items.append((name, Lit(a.value)))
        for name, value in given.items():
            if not any(k == name for k, _ in items) and isinstance(value, (int, float, bool, str)):
                items.append((name, Lit(value)))
        frame = Frame(kernel.module, None, {node.args.args[0].arg: DictVal(tuple(items))})
        v = self.project.evaluator.expr(frame, node.body)
        if isinstance(v, Lit):
            return v.value, ""
        return None, v.reason if isinstance(v, Unknown) else "not static"

    def cached(self, job: "CompileJob"):
        """The job's result from this run's memory or the disk cache, else None."""
        with self._lock:
            hit = self._results.get(job.identity)
        if hit is not None:
            return hit
        if self.cache is not None and job.src.hash:
            hit = self.cache.get(job.src.hash, job.key, job.target)
        return hit

    def scratch_ready(self, job: "CompileJob") -> "Outcome | None":
        """Write the job's scratch module for the child, or the outcome that says why it cannot
        be written. Its ``triton.language`` paths are resolved by the compile child before it
        loads the module (:meth:`~tilefit.pysource.extract.ScratchModule.load`; a refusal comes
        back as ``error_stage="blocked"`` with the same reason, :meth:`outcome_of`), not here:
        resolving them imports Triton, whose library would add ~76 MB to this process's resident
        memory (issue 18 item 5) and to every worker forked after it."""
        if job.src.kind != "scratch":
            return None
        try:
            job.src.scratch.write()  # the child loads it from there
        except Exception as exc:  # noqa: BLE001
            return Outcome("failed", estimator="exact",
                           detail=f"the scratch module cannot be written: {type(exc).__name__}: {exc}")
        return None

    def plan_of(self, job: "CompileJob"):
        from tilefit.kernels.plan import LaunchPlan

        return LaunchPlan(f"{job.case.kernel.key}", job.src.module, job.src.function, tuple(job.args), job.num_warps,
                          job.num_stages, job.options)

    def store(self, job: "CompileJob", result) -> None:
        """Keep a compile's result for this run, and on disk unless it says nothing about the
        kernel (a timeout, a crash, a setup error, the allowlist)."""
        with self._lock:
            self._results[job.identity] = result
        if self.cache is not None and job.src.hash and result.error_stage not in ("timeout", "crash", "setup",
                                                                                  "blocked"):
            self.cache.put(job.src.hash, job.key, job.target, result, kernel=job.case.kernel.key)

    def _compile(self, job: "CompileJob") -> Outcome:
        from tilefit.smem.worker import compile_plan_limited

        result = self.cached(job)
        if result is None:
            refused = self.scratch_ready(job)
            if refused is not None:
                return refused
            import time

            t0 = time.perf_counter()
            try:
                result = compile_plan_limited(self.plan_of(job), job.target, source=job.src.scratch)
            except Exception as exc:  # noqa: BLE001 - unsupported arch, bad plan: data, not a crash
                return Outcome("failed", estimator="exact", detail=f"{type(exc).__name__}: {exc}")
            finally:
                self.compiles += 1
                self.compile_seconds += time.perf_counter() - t0
            self.store(job, result)
        return self.outcome_of(job, result)

    def outcome_of(self, job: "CompileJob", result) -> Outcome:
        src, num_warps, num_stages = job.src, job.num_warps, job.num_stages
        if result.error_stage == "blocked":  # the allowlist refused a triton.language path (in the child)
            hint = "" if self.allow_import else "; --allow-import imports the module instead"
            return Outcome("unknown", detail=f"{result.error}{hint}")
        est = "exact" if src.kind == "scratch" else "import"
        if result.error is not None:
            status = "unsupported" if any(s in result.error for s in _UNSUPPORTED) else "failed"
            return Outcome(status, estimator=est, detail=_short_error(result.error), num_warps=num_warps,
                           num_stages=num_stages, bound=job.bound)
        return Outcome("ok", result.shared_bytes, est, num_warps=num_warps, num_stages=num_stages, bound=job.bound)

    # -- our reference kernels: the analytic model -------------------------------------------
    def _known(self, case: Case, variant: Variant, device, num_warps: int, num_stages: int) -> Outcome | None:
        from tilefit.estimate import EstimatorUnavailable

        spec = known_spec(case, variant, self.info(case.kernel), num_warps, num_stages)
        if spec is None or self.estimator is None:
            return None
        try:
            est = self.estimator.model.estimate(spec, device.arch)
        except Exception as exc:  # noqa: BLE001 - ModelError, EstimatorUnavailable
            if isinstance(exc, EstimatorUnavailable):
                return None
            return None
        return Outcome("ok", est.shared_bytes, f"analytic ({est.status})", num_warps=num_warps,
                       num_stages=num_stages)


_MISSING = object()


def _grouped(missing: list[str]) -> str:
    """``["A (why)", "B (why)", "C (other)"]`` -> ``"A, B (why), C (other)"``: names that share
    a reason are listed once with it (a stopped evaluation leaves every name with the same)."""
    order: dict[str, list[str]] = {}
    for item in missing:
        name, sep, reason = item.partition(" (")
        key = sep + reason if sep and item.endswith(")") else ""
        if not key:
            name = item
        order.setdefault(key, []).append(name)
    return ", ".join(", ".join(names) + key for key, names in order.items())


def _jsonable(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


def _freeze(d: Mapping) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in d.items()))


# words of a compile error that a pointer's element type causes (``tl.dot`` of fp32 and fp16)
DTYPE_ERRORS = ("must be same dtype", "Unsupported rhs dtype", "Unsupported lhs dtype", "must have the same dtype",
                "cannot cast int", "Unexpected dtype for", "Cannot bitcast data-type of size")


def _swept_dtype(out: Outcome, variant: Variant) -> Outcome:
    """A compile of a *swept* dtype variant (pointers nothing types, tried as bf16, fp16, fp8) that
    fails on a pointer's element type is a launch the code does not make: ``unsupported`` (like
    an fp8 type the arch lacks), not a failure. A declared or scenario variant keeps ``failed``."""
    if out.status != "failed" or variant.explicit or not out.detail or \
            not any(w in out.detail for w in DTYPE_ERRORS):
        return out
    return replace(out, status="unsupported",
                   detail=f"the kernel does not take the swept pointer dtypes {variant.label or ''}: {out.detail}")


def _short_error(text: str) -> str:
    """The line of a compile error that says what failed: the cause Triton gives after the
    source excerpt (``because: Both operands must be same dtype...``), else an ``error`` line,
    without the scratch module's path (:func:`tilefit.pysource.extract.without_scratch_location`:
    the same launch reads the same on every machine)."""
    from tilefit.pysource.extract import without_scratch_location

    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("because: ") and len(ln) < 400:
            where = next((x for x in lines if x.startswith("CompilationError: at ")), "")
            return f"{ln[len('because: '):]}" + (f" ({where.split(': ', 1)[1].rstrip(':')} of the kernel)"
                                                 if where else "")
    for ln in lines:
        if "error" in ln.lower() and len(ln) < 300:
            return without_scratch_location(ln)
    return without_scratch_location((lines[-1] if lines else text)[:300])


def known_spec(case: Case, variant: Variant, info: KernelInfo, num_warps: int, num_stages: int):
    """A ``KernelSpec`` for a kernel that has the name of one of our reference kernels (or of
    the engine kernel it reproduces): its kernel family's ``callsite_spec``, else None."""
    from tilefit import kernels

    family = kernels.by_function(case.kernel.name)
    if family is None:
        return None
    try:
        return family.callsite_spec(case.given, variant.dtype_of, info.data_pointers, num_warps, num_stages)
    except (KeyError, ValueError, TypeError):
        return None
