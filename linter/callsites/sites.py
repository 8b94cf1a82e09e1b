"""Call sites: launches resolved to their kernel, and autotune lists, as data for evaluation.

A :class:`LaunchSite` is one launch ``kernel[grid](...)`` resolved to a ``@triton.jit``
definition of the scanned tree, with the values of its arguments as
:class:`~tilefit.callsites.values.Val` (literals with their location, or the reason they are
unknown). ``x if c else y`` and locals assigned in several branches give one
:class:`Instance` per combination of branches. A launch inside a function whose arguments are
that function's parameters is also evaluated at each call site of that function that passes
different constants (one level: a launcher wrapper and its callers); the kernel itself may be
such a parameter.

An :class:`AutotuneSite` is the ``configs`` list of a ``@triton.autotune`` decorator, each
``triton.Config`` with its values, plus the launches of the kernel (for the constexprs the
configs do not set).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tilefit.model import Span
from tilefit.pysource.lazybody import release_recent
from tilefit.pysource.scan import CallRecord, KernelDef, LaunchCall, ModuleScan, is_top_level_def

from .project import Project
from .platforms import backend_of, capabilities_running, runs_on_none_of
from .labels import CAPABILITY_LABEL, consistent
from .values import (ALIAS, Absent, Arms, ConfigVal, DictVal, Frame, Lit, Loc, Ref, Seq, Unknown,
                     Val, both_values, branches, combine, function_params, restrict)

# Launch keywords that are compile options, not kernel arguments.
LAUNCH_OPTIONS = frozenset({
    "num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim", "kpack",
    "enable_fp_fusion", "launch_cooperative_grid", "instruction_sched_variant", "launch_pdl",
})
MAX_INSTANCES = 16
# the combinations of the deciding values alone (constexprs, options) when all of a launch's
# branches pass MAX_INSTANCES: as many as a launch's **config dicts may give (_instances)
MAX_DECIDING = 2 * MAX_INSTANCES


def is_option(kernel, name: str) -> bool:
    """Is the launch keyword ``name`` a compile option? One of :data:`LAUNCH_OPTIONS` that the
    kernel does not declare: Triton binds a keyword that names a kernel parameter to it
    (``launch_pdl=`` of a kernel with ``launch_pdl: tl.constexpr``); only the rest are options."""
    return name in LAUNCH_OPTIONS and (kernel is None or kernel.param(name) is None)


@dataclass
class Instance:
    """One combination of branches of a launch or config: values of arguments and options."""

    label: str
    args: dict[str, Val]
    options: dict[str, Val]

    def value(self, name: str) -> Val | None:
        return self.options.get(name) if name in LAUNCH_OPTIONS and name not in self.args else self.args.get(name)


@dataclass
class LaunchSite:
    kernel: KernelDef
    launch: LaunchCall
    module: ModuleScan  # where the anchor is
    anchor: Span
    lines: tuple[int, ...]  # lines whose `# noqa` applies
    instances: list[Instance]
    problems: list[str] = field(default_factory=list)
    caller: CallRecord | None = None
    arg_exprs: dict[str, ast.expr] = field(default_factory=dict)  # launch argument -> its expression
    kind: str = "launch"

    @property
    def path(self) -> str:
        return self.module.path

    @property
    def where(self) -> str:
        scope = f" in {self.launch.scope_name}()" if self.launch.scope_name else ""
        text = f"launch of {self.kernel.name}{scope}"
        if self.caller is not None:
            text += f" ({self.launch.module.path}:{self.launch.line}), called here"
        return text

    @property
    def identity(self) -> str:
        base = f"{self.kernel.key}@{self.launch.module.name}:{self.launch.scope_name}"
        if self.caller is not None:
            base += f"<-{self.module.name}:{self.caller.scope.name if self.caller.scope else ''}"
        return base


@dataclass
class AutotuneConfig:
    index: int
    label: str
    kwargs: dict[str, Val]
    options: dict[str, Val]
    loc: Loc | None
    generated: bool
    anchor: Span | None


@dataclass
class AutotuneSite:
    kernel: KernelDef
    module: ModuleScan
    anchor: Span
    lines: tuple[int, ...]
    configs: list[AutotuneConfig]
    problem: str | None
    launches: list[LaunchSite] = field(default_factory=list)
    pruned: bool = False  # prune_configs_by / early_config_prune: the list is filtered at run time
    kind: str = "autotune"

    @property
    def path(self) -> str:
        return self.module.path

    @property
    def where(self) -> str:
        return f"autotune configs of {self.kernel.name}"

    @property
    def identity(self) -> str:
        return f"autotune:{self.kernel.key}"


@dataclass
class Sites:
    launches: list[LaunchSite]
    autotunes: list[AutotuneSite]
    unresolved: list[tuple[LaunchCall, str]]  # subscript calls that are no known kernel, and why
    off_platform: int = 0  # launches that cannot run on the targets' backend (under `if is_hip_:`)


# ----------------------------------------------------------------------------------------------


def _kernels_of(val: Val) -> list[tuple[str, KernelDef]]:
    out = []
    for label, v in branches(val):
        if isinstance(v, Ref) and v.kind == "kernel":
            out.append((label, v.target))
    return out


_MAX_CALLERS = 64


def _callers(project: Project, fn, owner: ModuleScan, cache: dict) -> list[tuple[ModuleScan, CallRecord]]:
    """Calls of ``fn`` in the tree (by name, then resolved); attribute calls (``obj.fn()``) only
    count when ``obj`` is a module."""
    out = []
    if not is_top_level_def(fn):
        return out  # only a module-level def is ever a resolved callee (Evaluator.global_name)
    for m in project.all_modules():
        for rec in m.calls.get(fn.name, ()):
            if not rec.module_func:  # `a.b.name(...)`, `f().name(...)`: never a function of a module
                continue
            key = rec  # (a record outlives a release of its body: tilefit.pysource.lazybody)
            callee = cache.get(key)
            if callee is None:
                # every definition of the name, not only those the parameters' defaults let
                # reach the call (a call under `if mode == INT4:` is still a call of it)
                callee = project.evaluator.expr(Frame(m, rec.scope), rec.node.func)
                cache[key] = callee
            if isinstance(callee, Ref) and callee.kind == "function" and callee.target is fn:
                out.append((m, rec))
                if len(out) >= _MAX_CALLERS:
                    return out
    return out


def _caller_bindings(project: Project, fn, caller_module: ModuleScan, rec: CallRecord,
                     outer: dict | None = None) -> tuple[dict, list[str]]:
    """Values of ``fn``'s parameters at one call site (only those passed); ``outer``: what the
    caller's own caller passes it (two levels: a public entry point, a wrapper, the launcher)."""
    params = list(function_params(fn))
    positional = [a.arg for a in list(fn.args.posonlyargs) + list(fn.args.args)]
    frame = Frame(caller_module, rec.scope, dict(outer or {}), before_line=rec.node.lineno)
    out: dict[str, Val] = {}
    problems = []
    for i, a in enumerate(rec.node.args):
        if isinstance(a, ast.Starred):
            problems.append(f"the call at {caller_module.path}:{rec.node.lineno} unpacks *args")
            break
        if i < len(positional):
            out[positional[i]] = project.evaluator.expr(frame, a)
            _alias(out, positional[i], a, outer)
    for kw in rec.node.keywords:
        if kw.arg is None:
            problems.append(f"the call at {caller_module.path}:{rec.node.lineno} passes **kwargs")
        elif kw.arg in params:
            out[kw.arg] = project.evaluator.expr(frame, kw.value)
            _alias(out, kw.arg, kw.value, outer)
    return out, problems


def _alias(out: dict, param: str, arg: ast.expr, outer: dict | None) -> None:
    """The caller passes a plain name to ``param`` (``dispatch(qhidden, w1, ...)``): the
    launcher's ``B.size(1)`` is the caller's ``w1.shape[1]``, which a scenario binds (and through
    one more caller, the name that one passes)."""
    if isinstance(arg, ast.Name):
        name = outer.get(ALIAS + arg.id) if outer else None
        out[ALIAS + param] = name if isinstance(name, Lit) else Lit(arg.id)


def _map_launch(project: Project, launch: LaunchCall, kernel: KernelDef, frame: Frame) -> tuple[dict, dict, list]:
    """Launch arguments -> ({param: value}, {option: value}, problems). A ``**config`` whose value
    depends on the branch taken (a default-config function returning different dicts) is kept
    as ``args["**"]``: a list of (label, DictVal) alternatives."""
    ev = project.evaluator
    args: dict[str, Val] = {}
    options: dict[str, Val] = {}
    problems = []
    positional = [p for p in kernel.params]
    values: list[Val] = []
    for a in launch.node.args:
        if isinstance(a, ast.Starred):
            seq = ev.expr(frame, a.value)  # `*stage_args` of a tuple the launcher built: its items
            if isinstance(seq, Seq):
                values.extend(seq.items)
                continue
            problems.append(f"`{launch.module.source.segment(a, 40)}` unpacks arguments at run time")
            break
        values.append(ev.expr(frame, a))
    for i, v in enumerate(values):
        if i < len(positional):
            args[positional[i].name] = v
        else:
            problems.append(f"the launch passes {len(values)} positional arguments, "
                            f"{kernel.name} takes {len(positional)}")
            break
    for kw in launch.node.keywords:
        if kw.arg is None:
            meta = _mutated(ev, frame, kw.value, ev.expr(frame, kw.value), launch.node.lineno)
            arms = list(branches(meta))
            if isinstance(meta, DictVal):
                for k, v in meta.items:
                    (options if is_option(kernel, k) else args)[k] = v
            elif len(arms) > 1 and all(isinstance(v, DictVal) for _, v in arms):
                args.setdefault("**", []).extend(arms)  # type: ignore[union-attr]
            elif isinstance(meta, Absent):  # a dense scenario's `**config` of a MoE launch: what the
                # dict would pass is a dimension that model lacks, so its instance is not judged
                passed = {p.name for p in positional[:len(values)]} | {k.arg for k in launch.node.keywords if k.arg}
                for p in kernel.params:
                    if p.constexpr and p.name not in passed:
                        args[p.name] = meta
            else:
                why = next((v.reason for _, v in arms if isinstance(v, Unknown)), "not a static dict")
                problems.append(f"`**{launch.module.source.segment(kw.value, 40)}`: {why}")
            continue
        target = options if is_option(kernel, kw.arg) else args
        target[kw.arg] = ev.expr(frame, kw.value)
    for name, expr in _arg_exprs(launch, kernel).items():
        p = kernel.param(name)
        if p is not None and p.constexpr and (isinstance(args.get(name), Unknown) or isinstance(expr, ast.IfExp)
                                              and any(isinstance(x, Unknown) for _, x in branches(args.get(name)))):
            unit = ev.constexpr_stride(frame, expr)
            if unit is not None:
                args[name] = unit
            elif ev.scenario is not None and (_is_shape_read(expr) or _is_shape_read(_only_assignment(frame, expr))):
                # `block_size=key_cache.shape[1]` (or `d = x.shape[-1]; ... D=d`): the kernel's
                # parameter names the dimension
                args[name] = ev._dimension(name, args[name])
    return args, options, problems


def _mutated(ev, frame: Frame, node: ast.expr, value: Val, line: int) -> Val:
    """``value`` of the dict named by ``node`` as the launch at ``line`` splats it: the launching
    function's ``d["KEY"] = v`` statements above the line (of its body, not under a branch) set
    the key, ``d.pop("KEY")`` removed it (vLLM:
    ``config = config.copy(); config["SPLIT_K"] = 1; BLOCK_SIZE_K = config.pop("BLOCK_SIZE_K")``)."""
    fn = frame.func
    if fn is None or not isinstance(node, ast.Name) or not any(isinstance(v, DictVal) for _, v in branches(value)):
        return value
    sets: list[tuple[int, str, ast.expr]] = []
    pops: set[str] = set()
    top = {id(st) for st in fn.body}  # a key set under a branch may not be: only straight-line sets count
    for sub in ast.walk(fn):
        if getattr(sub, "lineno", line) >= line:
            continue
        if isinstance(sub, ast.Assign) and id(sub) in top and len(sub.targets) == 1 and \
                isinstance(sub.targets[0], ast.Subscript):
            t = sub.targets[0]
            if isinstance(t.value, ast.Name) and t.value.id == node.id and isinstance(t.slice, ast.Constant) and \
                    isinstance(t.slice.value, str):
                sets.append((sub.lineno, t.slice.value, sub.value))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "pop" and \
                isinstance(sub.func.value, ast.Name) and sub.func.value.id == node.id and sub.args and \
                isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str):
            pops.add(sub.args[0].value)
    if not sets and not pops:
        return value
    sets.sort()
    values = {key: ev.expr(frame.child(before_line=ln), expr) for ln, key, expr in sets}

    def apply(d: Val) -> Val:
        if not isinstance(d, DictVal):
            return d
        items = dict(d.items)
        items.update(values)
        for key in pops:
            items.pop(key, None)
        return DictVal(tuple(items.items()))

    if isinstance(value, DictVal):
        return apply(value)
    return Arms(tuple((lab, apply(v)) for lab, v in branches(value)))


def _assert_fails(ev, frame: Frame) -> bool:
    """Does a top-level ``assert`` of the launching function above the launch fold to False with
    the frame's bindings (``assert block_shape is not None and block_shape[0] == 0`` where the
    caller passes a [128, 128] block)? Then that call never reaches the launch."""
    if frame.func is None or frame.before_line is None:
        return False
    for stmt in frame.func.body:
        if getattr(stmt, "lineno", 0) >= frame.before_line:
            break
        if isinstance(stmt, ast.Assert):
            v = ev.expr(frame.child(before_line=stmt.lineno), stmt.test)
            if isinstance(v, Lit) and not v.value:
                return True
    return False


def _only_assignment(frame: Frame, expr: ast.expr) -> ast.expr | None:
    """The value of a local ``expr`` names when the launching function assigns it once, above
    the launch; else None."""
    if not isinstance(expr, ast.Name) or frame.func is None:
        return None
    from .values import local_assignments

    assigns = local_assignments(frame.func).get(expr.id, [])
    if len(assigns) != 1 or assigns[0].value is None or assigns[0].line >= (frame.before_line or 0) or \
            expr.id in function_params(frame.func):
        return None
    return assigns[0].value


def _is_shape_read(expr: ast.expr | None) -> bool:
    """``x.shape[i]`` or ``x.size(i)``."""
    return isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape" \
        or isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size"


def _arg_exprs(launch: LaunchCall, kernel: KernelDef) -> dict[str, ast.expr]:
    out = {}
    for p, a in zip(kernel.params, launch.node.args):
        if isinstance(a, ast.Starred):
            break
        out[p.name] = a
    for kw in launch.node.keywords:
        if kw.arg is not None:
            out[kw.arg] = kw.value
    return out


def _relevant(kernel: KernelDef, args: dict[str, Val]) -> dict[str, Val]:
    """Arguments whose branches matter: constexprs, and literals (None, ints) of the others."""
    out = {}
    for name, v in args.items():
        p = kernel.param(name)
        if p is None or p.constexpr or any(isinstance(x, Lit) for _, x in branches(v)):
            out[name] = v
    return out


def _instances(kernel: KernelDef, args: dict, options: dict, problems: list) -> list[Instance]:
    splat = args.pop("**", None)
    if splat:  # one set of instances per dict a **config can be
        out: list[Instance] = []
        for label, d in splat[:MAX_INSTANCES]:
            # the other arguments' branches that hold with this dict (`config["BLOCK_SIZE_M"]`
            # of the same batch size's entry)
            a, o = {k: restrict(v, label) for k, v in args.items()}, {k: restrict(v, label) for k, v in options.items()}
            for k, v in d.items:
                (o if is_option(kernel, k) else a)[k] = v
            for inst in _instances(kernel, a, o, problems):
                inst.label = ", ".join(x for x in (label, inst.label) if x)
                out.append(inst)
        return out[: MAX_INSTANCES * 2]
    for k, v in list(args.items()):  # a run-time bool passed as a constexpr: both compiles exist
        p = kernel.param(k)
        if p is not None and p.constexpr:
            args[k] = both_values(v)
    relevant = _relevant(kernel, args)
    keyed = {("a", k): v for k, v in relevant.items()}
    keyed.update({("o", k): v for k, v in options.items()})
    combos = combine({f"{t}:{k}": v for (t, k), v in keyed.items()}, MAX_INSTANCES)
    if combos is None:
        combos = _deciding_combos(kernel, keyed)
        if combos is not None:
            problems.append(f"more than {MAX_INSTANCES} combinations of branches: those of run-time arguments "
                            "not enumerated")
    if combos is None:
        problems.append(f"more than {MAX_INSTANCES} combinations of branches")
        combos = [("", {f"{t}:{k}": (v if not isinstance(v, Arms) else Unknown("too many branches"))
                        for (t, k), v in keyed.items()})]
    out = []
    for label, vals in combos:
        a = dict(args)
        o = {}
        for key, v in vals.items():
            t, _, k = key.partition(":")
            (a if t == "a" else o)[k] = v
        out.append(Instance(label, a, o))
    return out


def _one_value(v: Val) -> Val:
    """Branches that all give one literal (``block_size = key_cache.shape[3]`` in one layout,
    ``key_cache.shape[1]`` in the other, both the scenario's 16): that literal, so that they do not
    multiply the combinations (the compile is the same whichever branch ran)."""
    if not isinstance(v, Arms):
        return v
    vals = [x for _, x in branches(v)]
    first = vals[0]
    if all(isinstance(x, Lit) for x in vals) and \
            all(type(x.value) is type(first.value) and x.value == first.value for x in vals):
        return first
    return v


def _deciding_combos(kernel: KernelDef, keyed: dict) -> list | None:
    """When the branches of a launch's values give too many combinations: the combinations of
    the values that decide the compile (constexprs and options) only, each with the run-time
    arguments' branches that hold beside it (:func:`~.values.restrict`), and those left with
    several branches as run-time values (a plain integer, as they are when every branch is dropped;
    ``A_scale.stride(0) if A_scale is not None else 0``: quantised MoE launchers pass a dozen).
    None when the deciding values alone are more than :data:`MAX_DECIDING`."""
    def decides(t: str, k: str) -> bool:
        p = kernel.param(k)
        return t == "o" or p is None or p.constexpr

    deciding = {f"{t}:{k}": _one_value(v) for (t, k), v in keyed.items() if decides(t, k)}
    combos = combine(deciding, MAX_DECIDING)
    if combos is None:
        return None
    out = []
    for label, vals in combos:
        rest = {}
        for (t, k), v in keyed.items():
            if decides(t, k):
                continue
            r = restrict(v, label)
            rest[f"{t}:{k}"] = r if not isinstance(r, Arms) else Unknown("too many branches")
        out.append((label, {**rest, **vals}))
    return out


def _on_targets(instances: list[Instance], capabilities: frozenset | None) -> list[Instance]:
    """``instances`` of a launch that runs on the targets of ``capabilities`` only (None: on every
    target), labelled so (``compute capability 120 (the launch runs there only)``): elsewhere
    there is no such launch to judge. An instance whose own per-target label leaves none of them
    is dropped."""
    if capabilities is None:
        return instances
    atom = f"{CAPABILITY_LABEL}{'/'.join(map(str, sorted(capabilities)))} (the launch runs there only)"
    out = []
    for inst in instances:
        if not consistent([inst.label, atom] if inst.label else [atom]):
            continue
        inst.label = ", ".join(x for x in (inst.label, atom) if x)
        out.append(inst)
    return out


def _signature(kernel: KernelDef, inst: list[Instance]) -> tuple:
    """What decides the compile: constexprs and options by value, other arguments by the way a
    launch specialises them (None, 1, a multiple of 16, other)."""
    def one(name, v):
        if not isinstance(v, Lit):
            return ("U", type(v).__name__)
        p = kernel.param(name)
        if p is not None and not p.constexpr and isinstance(v.value, int) and not isinstance(v.value, bool):
            return ("I", 1 if v.value == 1 else 16 if v.value % 16 == 0 else 0)
        return ("L", repr(v.value))

    return tuple((i.label, tuple(sorted((k, one(k, v)) for k, v in i.args.items())),
                  tuple(sorted((k, one(k, v)) for k, v in i.options.items()))) for i in inst)


def _anchor(module: ModuleScan, launch: LaunchCall) -> tuple[Span, tuple[int, ...]]:
    node = launch.node
    for kw in node.keywords:
        if kw.arg == "num_stages":
            span = module.source.span(kw.value)
            return span, tuple(sorted({span.start.line, node.lineno}))
    span = module.source.span(node.func)
    return span, (node.lineno,)


def build_sites(project: Project, only: set | None = None, used: set | None = None,
                quant_used: set | None = None, batch_used: set | None = None,
                kv_quant_used: set | None = None, dcp_used: set | None = None,
                rows_used: set | None = None) -> Sites:
    """Launch and autotune sites of the project's primary modules. ``only``: ids of the
    launches to build (others skipped); ``used``: filled with the ids of the launches whose
    values read a key of the evaluator's scenarios; ``quant_used``: of those that read an
    attribute of its quantisation scheme or a MoE config; ``batch_used``: of those that read the
    batch dimension; ``kv_quant_used``: of those that read a quantised KV-cache preset's value;
    ``dcp_used``: of those that read a decode context-parallel group's size, rank or buffers;
    ``rows_used``: of those that read a forward's token rows (a prefill chunk's size)."""
    ev = project.evaluator
    launches: list[LaunchSite] = []
    unresolved: list[tuple[LaunchCall, str]] = []
    caller_cache: dict[object, list] = {}  # launcher -> its callers
    callee_cache: dict[CallRecord, Val] = {}
    off_platform = 0
    for module in project.primary_modules():
        for launch in module.launches:
            if only is not None and id(launch) not in only:
                continue
            if ev.backend is not None and backend_of(module.path) not in (None, ev.backend):
                off_platform += 1  # a module only another backend imports (platform_modules.json)
                continue
            if ev.backend is not None and runs_on_none_of(module.path, ev.capabilities):
                off_platform += 1  # a module only GPUs of other capability majors run (SM100-only)
                continue
            if ev.scenario is not None and not ev.scenario.applies(module.path):
                # a kernel family the scenario's model does not run in this role (an MLA model's
                # absorbed head in vLLM's generic prefill): judged under the other scenarios
                if used is not None:
                    used.add(id(launch))
                continue
            ev.begin_site()  # each launch (with its callers) within its own budget
            frame = Frame(module, launch.scope, before_line=launch.line)
            if ev.backend is not None and not ev.reachable(frame):
                off_platform += 1  # e.g. the ROCm-only branch, on NVIDIA targets
                continue
            on_targets = ev.reachable_targets(frame)  # `if has_device_capability(90): launch`
            on_module = capabilities_running(module.path, ev.capabilities) if ev.backend is not None else None
            if on_module is not None:  # a module only some targets' GPUs run (platform_modules.json)
                on_targets = on_module if on_targets is None else on_targets & on_module
            if on_targets is not None and not on_targets:
                off_platform += 1
                continue
            callee = ev.expr(frame, launch.callee)
            scope = launch.scope
            callers = []
            if scope is not None and any(isinstance(v, Unknown) for _, v in branches(callee)) or \
                    scope is not None and _uses_params(project, launch, scope):
                if scope not in caller_cache:
                    caller_cache[scope] = _callers(project, scope, module, callee_cache)
                callers = caller_cache[scope]
            kernels = _kernels_of(callee)
            default_sigs: dict[int, tuple] = {}
            through_callers: set[int] = set()  # kernels whose launch is judged at its callers only
            if kernels:
                for _, kernel in kernels:
                    args, options, problems = _map_launch(project, launch, kernel, frame)
                    inst = _on_targets(_instances(kernel, args, options, problems), on_targets)
                    default_sigs[id(kernel)] = _signature(kernel, inst)
                    if callers and _needs_caller(kernel, inst, scope):
                        # the compile depends on what the callers pass: the launch exists only as
                        # their call sites make it (each one a site), not with unknown parameters
                        through_callers.add(id(kernel))
                        continue
                    anchor, lines = _anchor(module, launch)
                    launches.append(LaunchSite(kernel, launch, module, anchor, lines, inst, problems,
                                               arg_exprs=_arg_exprs(launch, kernel)))
            chains = []  # (caller module, call record, bindings of the launcher's parameters, problems)
            for caller_module, rec in callers:
                bindings, cproblems = _caller_bindings(project, scope, caller_module, rec)
                outer = _outer_callers(project, rec, bindings, caller_cache, callee_cache)
                if not outer:
                    chains.append((caller_module, rec, bindings, cproblems))
                for m2, rec2 in outer:  # the caller's own parameters decide: one more level up
                    b2, p2 = _caller_bindings(project, rec.scope, m2, rec2)
                    if not ev.reachable(Frame(caller_module, rec.scope, b2,
                                                                         before_line=rec.node.lineno)):
                        continue  # with what this caller passes, the call of the launcher is never made
                    bindings2, cproblems2 = _caller_bindings(project, scope, caller_module, rec, b2)
                    chains.append((m2, rec2, bindings2, cproblems2 + p2))
            for caller_module, rec, bindings, cproblems in chains:
                cframe = Frame(module, scope, bindings, before_line=launch.line)
                if _assert_fails(ev, cframe):
                    continue  # what this caller passes fails the launcher's assert: no launch from it
                ckernels = _kernels_of(ev.expr(cframe, launch.callee))
                for _, kernel in ckernels:
                    args, options, problems = _map_launch(project, launch, kernel, cframe)
                    inst = _on_targets(_instances(kernel, args, options, problems + cproblems), on_targets)
                    if id(kernel) not in through_callers and default_sigs.get(id(kernel)) == _signature(kernel, inst):
                        continue  # the caller passes nothing that changes the compile
                    span = caller_module.source.span(rec.node.func)
                    launches.append(LaunchSite(kernel, launch, caller_module, span, (rec.node.lineno,), inst,
                                               problems + cproblems, caller=rec,
                                               arg_exprs=_arg_exprs(launch, kernel)))
            if used is not None and ev.scenario_hit:
                used.add(id(launch))
            if quant_used is not None and ev.quant_hit:
                quant_used.add(id(launch))
            if batch_used is not None and ev.batch_hit:
                batch_used.add(id(launch))
            if kv_quant_used is not None and ev.kv_quant_hit:
                kv_quant_used.add(id(launch))
            if dcp_used is not None and ev.dcp_hit:
                dcp_used.add(id(launch))
            if rows_used is not None and ev.rows_hit:
                rows_used.add(id(launch))
            if not kernels and not any(s.launch is launch for s in launches):
                reason = "; ".join(v.reason for _, v in branches(callee) if isinstance(v, Unknown)) or \
                    "not a @triton.jit kernel of the scanned tree"
                unresolved.append((launch, reason))
        release_recent()  # memory: the bodies this module's launches read (parsed again when read)
    ev.end_site()
    autotunes = [_autotune_site(project, k, launches) for m in project.primary_modules() for k in m.all_kernels
                 if k.autotune is not None]
    return Sites(launches, autotunes, unresolved, off_platform)


_MAX_OUTER = 8


def _outer_callers(project: Project, rec: CallRecord, bindings: dict, caller_cache: dict,
                   callee_cache: dict) -> list:
    """The callers of ``rec``'s function when a value it passes is one of its own parameters
    without a default (and it has callers in the tree); else ``[]``."""
    scope = rec.scope
    if scope is None:
        return []
    mark = f"parameter of {scope.name}() without a default"
    if not any(isinstance(x, Unknown) and not isinstance(x, Absent) and mark in x.reason
               for v in bindings.values() for _, x in branches(v)):
        return []
    if not is_top_level_def(scope):
        return []  # (as _callers answers) a nested function: released with its body, never keyed
    if scope not in caller_cache:
        caller_cache[scope] = _callers(project, scope, None, callee_cache)
    return [c for c in caller_cache[scope] if c[1] is not rec][:_MAX_OUTER]


def _needs_caller(kernel: KernelDef, instances: list[Instance], scope) -> bool:
    """Does a value that decides the compile (a constexpr, an option) depend on a parameter of
    ``scope`` without a default (so only its callers say what it is)?"""
    mark = f"parameter of {scope.name}() without a default"
    for inst in instances:
        for name, v in list(inst.args.items()) + list(inst.options.items()):
            p = kernel.param(name)
            if name in inst.args and (p is None or not p.constexpr):
                continue
            if any(isinstance(x, Unknown) and not isinstance(x, Absent) and mark in x.reason for _, x in branches(v)):
                return True
    return False


def _uses_params(project: Project, launch: LaunchCall, scope) -> bool:
    """Does the launch use a parameter of the function it is in (directly, not via locals)?"""
    params = set(function_params(scope))
    if not params:
        return False
    for node in ast.walk(launch.node):
        if isinstance(node, ast.Name) and node.id in params:
            return True
    # locals assigned from parameters (BLOCK = block_size) count too
    from .values import local_assignments

    assigned = local_assignments(scope)
    names = {n.id for n in ast.walk(launch.node) if isinstance(n, ast.Name)}
    for name in names & set(assigned):
        for a in assigned[name]:
            if a.value is not None and any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(a.value)):
                return True
    return False


def _autotune_site(project: Project, kernel: KernelDef, launches: list[LaunchSite]) -> AutotuneSite:
    module = kernel.module
    dec = kernel.autotune
    assert dec is not None
    anchor = module.source.span(dec)
    configs_node = None
    pruned = False
    for kw in dec.keywords:
        if kw.arg == "configs":
            configs_node = kw.value
        elif kw.arg in ("prune_configs_by",) and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
            pruned = True
    if configs_node is None and dec.args:
        configs_node = dec.args[0]
    problem = None
    configs: list[AutotuneConfig] = []
    if configs_node is None:
        problem = "the autotune decorator has no configs"
    else:
        val = project.evaluator.expr(Frame(module), configs_node)
        index = 0
        for label, arm in branches(val):
            if not isinstance(arm, Seq):
                problem = arm.reason if isinstance(arm, Unknown) else "the configs are not a static list"
                continue
            for item in arm.items:
                for sub_label, cfg in branches(item):
                    if not isinstance(cfg, ConfigVal):
                        problem = cfg.reason if isinstance(cfg, Unknown) else "a config is not a triton.Config"
                        continue
                    lab = ", ".join(x for x in (label, sub_label) if x)
                    span = cfg.loc.span if cfg.loc is not None and cfg.loc.path == module.path else None
                    configs.append(AutotuneConfig(index, lab, dict(cfg.kwargs), dict(cfg.options), cfg.loc,
                                                  cfg.generated or arm.generated, span))
                    index += 1
    site = AutotuneSite(kernel, module, anchor, (dec.lineno, kernel.node.lineno), configs, problem,
                        [s for s in launches if s.kernel is kernel], pruned)
    return site


def heuristics_of(project: Project, kernel: KernelDef) -> dict[str, ast.expr]:
    """``@triton.heuristics({"NAME": lambda args: ...})`` -> {NAME: lambda node}."""
    out = {}
    for dec in kernel.heuristics:
        node = dec.args[0] if dec.args else next((k.value for k in dec.keywords if k.arg == "values"), None)
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out[k.value] = v
        elif node is not None:
            val = project.evaluator.expr(Frame(kernel.module), node)
            if isinstance(val, DictVal):
                for k, v in val.items:
                    out[k] = v  # type: ignore[assignment]
    return out


def _instance_key(inst: Instance) -> tuple:
    def one(v):
        return ("L", repr(v.value)) if isinstance(v, Lit) else ("U", getattr(v, "reason", type(v).__name__))
    return (tuple(sorted((k, one(v)) for k, v in inst.args.items() if k != "**")),
            tuple(sorted((k, one(v)) for k, v in inst.options.items())))


def _absent_in(kernel: KernelDef, inst: Instance) -> bool:
    """Does a value that decides the compile (a constexpr, an option) need a model dimension the
    instance's scenario does not have (:class:`~.values.Absent`)?"""
    for name, v in inst.args.items():
        p = kernel.param(name)
        if p is not None and p.constexpr and any(isinstance(x, Absent) for _, x in branches(v)):
            return True
    return any(isinstance(x, Absent) for v in inst.options.values() for _, x in branches(v))


def build_scenario_sites(project: Project, scenarios, backend: str | None = None,
                         capabilities: frozenset = frozenset(), devices: tuple = ()) -> Sites:
    """:func:`build_sites` once per scenario (:mod:`.scenarios`; values of two scenarios never mix
    in one launch), merged: a launch's instances carry ``scenario NAME`` in their label, and an
    instance that another scenario already gave (same values) is kept once. Only the launches
    whose values read a scenario's key in the first pass are built again for the others (the
    rest do not depend on the scenario and carry no label). Without scenarios, one plain pass.
    ``capabilities``: the targets' compute capabilities (89, 120), for platform tests that fold;
    ``devices``: the targets' device records, whose fused-MoE configs a MoE scenario binds
    (:mod:`.moeconfigs`).
    An MLA scenario judges each kernel family in the roles it runs there (names.json
    ``mla_roles``): absorbed 576/512 in decode launchers, multi-head 192/128 in SGLang's extend,
    not at all in vLLM's generic prefill launchers (its MLA backends never call them)."""
    from .scenarios import with_roles
    from .values import Evaluator

    scenarios = with_roles(scenarios)  # an MLA model: its absorbed and its prefill role
    if not scenarios:
        project.evaluator.backend = backend
        project.evaluator.capabilities = capabilities
        return build_sites(project)
    merged: list[LaunchSite] = []
    index: dict[tuple, LaunchSite] = {}
    seen: dict[tuple, set] = {}
    first: Sites | None = None
    keys = frozenset(k for s in scenarios for k in s.values)
    from .scenarios import batch_keys, dcp_vocabulary, kv_quant_vocabulary, quant_vocabulary, row_keys, vocabulary

    # a KV-cache preset's own bindings (its softmax scale, flags) are no dimension other models lack
    dims = frozenset(k for s in scenarios if s.variant != "kv_quant" for k in s.dims) | vocabulary()
    only: set | None = None  # after the first scenario: the launches that read a scenario key
    quant_only: set = set()  # the launches that read a quantisation attribute or a MoE config
    batch_only: set = set()  # the launches that read the batch dimension
    kv_quant_only: set = set()  # the launches that read a quantised KV-cache preset's value
    dcp_only: set = set()  # the launches that read a decode context-parallel group's value
    rows_only: set = set()  # the launches that read a forward's token rows
    absent: dict[tuple, list[Instance]] = {}  # instances of scenarios without a dimension they read
    for scenario in scenarios:
        ev = Evaluator(project)
        ev.backend = backend
        ev.capabilities = capabilities
        ev.devices = tuple(devices)
        ev.scenario = scenario
        ev.scenario_keys = keys
        ev.scenario_dims = dims
        ev.quant_names = quant_vocabulary()
        ev.kv_quant_names = kv_quant_vocabulary()
        ev.batch_keys = batch_keys()
        ev.row_keys = row_keys()
        ev.dcp_names = dcp_vocabulary()
        project.evaluator = ev
        used: set = set()
        if scenario.variant:  # a further scheme or batch size: only what reads it changes
            rebuilt = {"quant": quant_only, "kv_quant": kv_quant_only, "dcp": dcp_only,
                       "rows": rows_only}.get(scenario.variant, batch_only)
            sites = build_sites(project, only=rebuilt & (only or set()), used=used)
        else:
            sites = build_sites(project, only=only, used=used, quant_used=quant_only, batch_used=batch_only,
                                kv_quant_used=kv_quant_only, dcp_used=dcp_only, rows_used=rows_only)
        if only is None:
            only = used
        first = first or sites
        for site in sites.launches:
            key = (id(site.launch), id(site.caller) if site.caller is not None else None, id(site.kernel))
            have = index.get(key)
            if have is None:
                have = index[key] = site
                merged.append(site)
                seen[key] = set()
                keep = list(site.instances)
                site.instances = []
            else:
                keep = site.instances
            for inst in keep:
                k = _instance_key(inst)
                if k in seen[key]:
                    continue
                seen[key].add(k)
                if id(site.launch) in used:  # its values depend on the scenario (and the batch size)
                    label = scenario.label
                    if scenario.batch is not None and scenario.rows is None and id(site.launch) in batch_only:
                        label += f" (batch size {scenario.batch})"
                    inst.label = ", ".join(x for x in (label, inst.label) if x)
                if _absent_in(site.kernel, inst):
                    absent.setdefault(key, []).append(inst)  # the model lacks a dimension the launch needs
                    continue
                have.instances.append(inst)
    judged = {key[0] for key, site in index.items() if site.instances}
    for key, site in index.items():
        if not site.instances and key[0] not in judged:
            # no scenario has what the launch needs: judged (not evaluated) as it is
            site.instances = absent.get(key, [])
    merged = [site for site in merged if site.instances]
    autotunes = [_autotune_site(project, k, merged) for m in project.primary_modules() for k in m.all_kernels
                 if k.autotune is not None]
    return Sites(merged, autotunes, first.unresolved, first.off_platform)
