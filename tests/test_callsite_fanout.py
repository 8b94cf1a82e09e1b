"""Branch fan-out of a launcher with a per-target test (issue 18 item 5): vLLM 0.33.0's
``causal_conv1d_update`` / ``causal_conv1d_fn`` pass ``launch_pdl=current_platform.is_arch_support_pdl()``
(answered per target), so every local of the launcher is looked up per target. Locals unpacked
from a shape or a ``stride()`` (``batch, dim, seqlen = x.shape``) are rebuilt nodes; when each
lookup rebuilt them, the targets' identical assignments never grouped, each local became one arm
per target, the instances multiplied and the site hit the 2 s clock on every run (so the run's
results were never stored and every warm run repeated the whole Python pass).

The fixture is our own code in the shape of that vLLM launcher and two of its callers. The
evaluation is measured with the deterministic step counter (the clock is switched off), never
with time."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tilefit.callsites.labels import Atoms, EMPTY, consistent, label_capabilities
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Arms, Lit, branches, combine

OPS = '''import triton
import triton.language as tl

from .platform import current_platform


@triton.jit
def _conv_update_kernel(x_ptr, w_ptr, state_ptr, o_ptr, batch: int, dim: tl.constexpr,
                        seqlen: tl.constexpr, state_len: tl.constexpr, stride_x_seq: tl.constexpr,
                        stride_x_dim: tl.constexpr, stride_w_dim: tl.constexpr,
                        stride_w_width: tl.constexpr, stride_o_seq: tl.constexpr,
                        HAS_BIAS: tl.constexpr, KERNEL_WIDTH: tl.constexpr, SILU: tl.constexpr,
                        IS_VARLEN: tl.constexpr, NP2_STATELEN: tl.constexpr, BLOCK_N: tl.constexpr,
                        launch_pdl: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    v = tl.load(x_ptr + offs * stride_x_dim, mask=offs < dim)
    tl.store(o_ptr + offs * stride_o_seq, v, mask=offs < dim)


def conv_update(x, conv_state, weight, bias=None, activation=None, query_start_loc=None,
                max_query_len=-1, out=None):
    if out is None:
        out = x
    if query_start_loc is None:
        if x.dim() == 2:
            x = x.unsqueeze(-1)
            out = out.unsqueeze(-1)
        batch, dim, seqlen = x.shape
    else:
        batch = query_start_loc.size(0) - 1
        dim = x.size(1)
        seqlen = max_query_len
    _, width = weight.shape
    num_cache_lines, _, state_len = conv_state.size()
    stride_w_dim, stride_w_width = weight.stride()
    if query_start_loc is None:
        stride_x_seq, stride_x_dim, stride_x_token = x.stride()
        stride_o_seq, stride_o_dim, stride_o_token = out.stride()
    else:
        stride_x_token, stride_x_dim = x.stride()
        stride_x_seq = 0
        stride_o_token, stride_o_dim = out.stride()
        stride_o_seq = 0
    np2_statelen = triton.next_power_of_2(state_len)
    _conv_update_kernel[(batch, triton.cdiv(dim, 256))](
        x, weight, conv_state, out, batch, dim, seqlen, state_len, stride_x_seq, stride_x_dim,
        stride_w_dim, stride_w_width, stride_o_seq,
        HAS_BIAS=bias is not None,
        KERNEL_WIDTH=width,
        SILU=activation in ["silu", "swish"],
        IS_VARLEN=query_start_loc is not None,
        NP2_STATELEN=np2_statelen,
        BLOCK_N=256,
        launch_pdl=current_platform.is_arch_support_pdl(),
    )
    return out
'''

CALLERS = '''from .conv_ops import conv_update


class ShortConv:
    def __init__(self, bias):
        self.bias = bias

    def decode(self, x, conv_state, weight):
        return conv_update(x, conv_state, weight, self.bias, activation=None)

    def verify(self, x, conv_state, weight, query_start_loc, max_query_len):
        return conv_update(x, conv_state, weight, None, "silu", query_start_loc, max_query_len)
'''

OLD, NEW = frozenset({86, 87, 89}), frozenset({110, 120, 121})  # is_arch_support_pdl() False / True
TARGETS = frozenset({86, 87, 89, 110, 120, 121})  # the consumer group's


def _sites(tmp_path, max_steps=None):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "platform.py").write_text("current_platform = None\n")
    (tmp_path / "conv_ops.py").write_text(OPS)
    (tmp_path / "short_conv.py").write_text(CALLERS)
    project = Project.scan([str(p) for p in sorted(tmp_path.glob("*.py"))])
    ev = project.evaluator
    ev.max_seconds = 1e9  # the step count alone bounds the sites: repeatable
    if max_steps is not None:
        ev.max_steps = max_steps
    steps = []
    begin = ev.begin_site

    def counted():
        if ev._deadline is not None:
            steps.append(ev._steps)
        begin()

    ev.begin_site = counted
    sites = build_scenario_sites(project, [], "cuda", TARGETS)
    steps.append(ev._steps)
    return project, sites, steps


def test_the_launcher_and_its_callers_evaluate_well_within_the_step_budget(tmp_path):
    project, sites, steps = _sites(tmp_path)
    ev = project.evaluator
    assert ev.stopped_by_time == 0
    assert ev.exhausted is None
    # the whole launch (its own instances and both callers') in one site's budget: 715 steps; with
    # one arm per target of every unpacked local, 1540 here (in vLLM's launcher, the 2 s clock)
    assert max(steps) < 1000, steps
    where = sorted((s.module.path.rsplit("/", 1)[-1], s.anchor.start.line) for s in sites.launches)
    assert where == [("conv_ops.py", 45), ("short_conv.py", 9), ("short_conv.py", 12)], where
    for site in sites.launches:
        for inst in site.instances:
            for _, v in itertools.chain.from_iterable(branches(x) for x in inst.args.values()):
                assert "bounded evaluation" not in getattr(v, "reason", ""), (site.where, v)


def test_locals_assigned_alike_on_every_target_are_one_value_not_one_arm_per_target(tmp_path):
    _, sites, _ = _sites(tmp_path)
    for site in sites.launches:
        for inst in site.instances:
            # only `launch_pdl` depends on the target: two answers (sm_8x False, sm_110/12x True)
            assert label_capabilities(inst.label) in (None, OLD, NEW), inst.label
            assert "per target)" not in inst.label, inst.label
            for name in ("dim", "KERNEL_WIDTH", "stride_w_dim", "NP2_STATELEN", "state_len"):
                labels = [lab for lab, _ in branches(inst.args[name])]
                assert not any("per target)" in lab for lab in labels), (site.where, name, labels)
    # instances: the two answers of `launch_pdl` times the run-time bools (`activation in [...]`;
    # at the decode caller `bias is not None` too), not times the six targets (12 and 24 before)
    count = {(s.module.path.rsplit("/", 1)[-1], s.anchor.start.line): len(s.instances) for s in sites.launches}
    assert count == {("conv_ops.py", 45): 4, ("short_conv.py", 9): 8, ("short_conv.py", 12): 1}, count
    decode = next(s for s in sites.launches if s.caller is not None and s.anchor.start.line == 9)
    # `query_start_loc is None` at this caller: one layout of x, so `dim` is one run-time value
    assert all(len(list(branches(i.args["dim"]))) == 1 for i in decode.instances), \
        [list(branches(i.args["dim"])) for i in decode.instances]
    pdl = sorted((sorted(label_capabilities(i.label)), i.args["launch_pdl"].value) for i in decode.instances
                 if isinstance(i.args["launch_pdl"], Lit))
    assert pdl and {tuple(c) for c, _ in pdl} == {tuple(sorted(OLD)), tuple(sorted(NEW))}, pdl
    assert all(v is (frozenset(c) == NEW) for c, v in pdl), pdl


def test_a_small_step_budget_stops_the_site_by_steps_not_by_the_clock(tmp_path):
    """What the step budget stops is repeatable (a run with it is stored); the clock never ran."""
    project, sites, _ = _sites(tmp_path, max_steps=200)
    assert project.evaluator.stopped_by_time == 0
    reasons = {getattr(v, "reason", "") for s in sites.launches for i in s.instances
               for x in i.args.values() for _, v in branches(x)}
    assert any("stopped after 200 steps" in r for r in reasons), reasons


# ---- labels: parsed once, the same verdicts -----------------------------------------------------

_ATOMS = st.sampled_from([
    "if c", "if not c", "if d", "if not d", "if not not c", "x=1 (line 3)",
    "compute capability 86/89 (f() False)", "compute capability 120 (f() True)",
    "compute capability 89/120 (g() True)", "compute capability none (h())",
    "element type of k: bf16", "element type of k: fp8e4nv", "element type of v: bf16",
    "MoE config E=8 taking entry 1", "MoE config E=8 taking entry 2",
    "cfg() (line 4:0) returning at line 7", "cfg() (line 4:0) returning at line 9",
    "`for` at line 5 taking entry 0", "`for` at line 5 taking entry 1", "scenario llama-gqa-128",
])
_LABELS = st.lists(st.lists(_ATOMS, min_size=0, max_size=3).map(", ".join), max_size=5)


def _pairwise(labels) -> bool:
    """The rule the labels follow, written out: a set of atoms holds unless two of them exclude
    each other, or the per-target atoms leave no target."""
    atoms = {a for lab in labels for a in lab.split(", ") if a}
    for a, b in itertools.combinations(sorted(atoms), 2):
        if {a, b} in ({"if c", "if not c"}, {"if d", "if not d"}, {"if not c", "if not not c"}):
            return False
        if a.startswith("MoE config ") and b.startswith("MoE config "):
            return False
        if a.startswith("element type of ") and b.startswith("element type of ") and \
                a.split(": ")[0] == b.split(": ")[0]:
            return False
        for word in (" returning at line ", " taking entry "):
            if word in a and word in b and a.partition(word)[0] == b.partition(word)[0]:
                return False
    caps = label_capabilities(list(atoms))
    return caps is None or bool(caps)


@settings(max_examples=300, deadline=None)
@given(_LABELS)
def test_atoms_grown_label_by_label_give_the_verdict_of_the_whole_set(labels):
    assert consistent(labels) is _pairwise(labels)
    state = EMPTY
    for lab in labels:
        state = state.add(lab) if state is not None else None
    assert (state is not None) is _pairwise(labels)
    if state is not None:
        assert state.text() == ", ".join(dict.fromkeys(a for lab in labels for a in lab.split(", ") if a))


def test_combine_prunes_exclusive_arms_and_joins_each_atom_once():
    a = Arms((("if c", Lit(1)), ("if not c", Lit(2))))
    b = Arms((("if c", Lit(10)), ("if not c", Lit(20))))
    pdl = Arms((("compute capability 86/89 (f() False)", Lit(False)),
                ("compute capability 120 (f() True)", Lit(True))))
    got = combine({"a": a, "b": b, "pdl": pdl})
    assert [(lab, {k: v.value for k, v in vals.items()}) for lab, vals in got] == [
        ("if c, compute capability 86/89 (f() False)", {"a": 1, "b": 10, "pdl": False}),
        ("if c, compute capability 120 (f() True)", {"a": 1, "b": 10, "pdl": True}),
        ("if not c, compute capability 86/89 (f() False)", {"a": 2, "b": 20, "pdl": False}),
        ("if not c, compute capability 120 (f() True)", {"a": 2, "b": 20, "pdl": True}),
    ]
    # 2**5 combinations of independent tests: more than the limit
    many = {f"v{i}": Arms(((f"if t{i}", Lit(0)), (f"if not t{i}", Lit(1)))) for i in range(5)}
    assert combine(many, 16) is None and len(combine(many, 32)) == 32
    assert isinstance(Atoms().add("if c"), Atoms) and Atoms().add("if c").add("if not c") is None
