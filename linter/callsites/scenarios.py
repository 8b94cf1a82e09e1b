"""Shape scenarios: named model facts that bind the run-time values of kernel launches.

A launch's tile sizes often come from tensors (``Lk = k_buffer.shape[-1]``, ``kv_group_num =
q.shape[1] // k_buffer.shape[-2]``) or from a wrapper's parameters without defaults
(``num_kv_splits``): nothing static says what they are. A :class:`Scenario` says it for one
model: ``values`` binds expressions by their text (``"k_buffer.shape[-1]"``; ``x.size(i)`` is
read as ``x.shape[i]``) and parameters of the scanned functions by name (``num_kv_splits``,
``is_mla``: a scenario's value wins over the parameter's default and over what a caller passes),
and ``dtypes`` gives the dtype variants of a kernel's pointer parameters by name
(``"k_buffer,v_buffer"`` vary together; names match case-insensitively, so ``K_Buffer`` too).

Shipped scenarios (``linter/data/scenarios/models.json``) are model facts (heads per rank, KV
heads, head sizes or MLA's ``kv_lora_rank + qk_rope_head_dim``, KV dtypes, MoE experts and sizes)
that :func:`from_facts` turns into bindings of the tensor names the engines use (``q``,
``k_buffer``, ``kv_cache``, ``key_cache``, ...). A project adds its own as
``[tool.tilefit.scenarios.NAME]`` tables (:func:`from_table`); ``tilefit check --scenario
config.json`` builds one from a model's ``config.json`` (the CLI passes the facts).

Each scenario is evaluated on its own (values of two scenarios never mix in one launch); the
launch's instances are labelled ``scenario NAME``, and a finding names the scenario and the
dtype variant it failed for.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

DATA = Path(__file__).resolve().parent.parent / "data" / "scenarios" / "models.json"

Q_NAMES = ("q", "query", "Q", "q_nope", "q_input")
K_NAMES = ("k_buffer", "k_cache", "key_cache", "kv_cache", "kv_buffer", "K_Buffer", "kv_c_and_k_pe_cache", "k", "key")
V_NAMES = ("v_buffer", "v_cache", "value_cache", "V_Buffer", "v", "value")
KV_POINTERS = ("k_buffer", "v_buffer", "k_cache", "v_cache", "key_cache", "value_cache", "kv_cache",
               "kv_buffer", "kv_c_and_k_pe_cache")
Q_POINTERS = ("q", "query")
NAMES = DATA.parent / "names.json"
_FACTS = {"heads", "kv_heads", "head_dim", "v_head_dim", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "tp",
          "kv_dtypes", "activation_dtype", "num_kv_splits", "page_size", "block_size", "experts", "moe_intermediate",
          "hidden", "top_k", "logit_cap", "sliding_window", "quant",
          "batch_sizes", "kv_quant", "index_kpool", "index_page_size", "index_head_dim", "tail_extra_slots",
          "num_draft_tokens", "qsa_compress_ratio", "qsa_budget", "index_topk", "dcp_sizes",
          "qsa_index_kv_heads", "qsa_index_head_dim", "qsa_indexer_dtypes", "infllm_kernel_size",
          "infllm_kernel_stride", "prefill_rows",
          "request_slots", "pages_per_request"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class GivenTensor:
    """A scenario's value of an optional tensor parameter that its launches may pass or not
    (``x is None`` keeps both answers, one arm each), over the parameter's ``None`` default."""

    why: str = ""


@dataclass(frozen=True)
class PerDtype:
    """A scenario's value that depends on the element type of ``tensor`` (one of the dtypes the
    scenario gives it): ``values`` is (dtype, value) per dtype, one arm each when evaluated."""

    tensor: str
    values: tuple[tuple[str, Any], ...]


class ScenarioError(ValueError):
    """An unknown scenario name or a malformed scenario table (exit code 2)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    values: Mapping[str, Any] = field(default_factory=dict)  # expression text or parameter name -> value
    dtypes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # "a,b" -> dtypes (vary together)
    description: str = ""
    source: str = ""
    # identifier -> value, for values nothing static gives (names.json: `head_size`, `self.page_size`)
    dims: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)  # the model facts it was built from
    # an MLA model's role (names.json mla_roles): "absorbed" (576/512, one latent KV head) or
    # "prefill" (multi-head 192/128); "" for a model with one shape of attention
    role: str = ""
    # the quantisation scheme of its MoE experts (names.json ``quant``: "none", "fp8-block-128",
    # ...); "" for a scenario without the fact
    quant: str = ""
    # "quant" / "batch": a further quantisation scheme or batch size of the facts' lists
    # (:func:`with_roles`), not the scenario itself; "" for the scenario itself
    variant: str = ""
    batch: int | None = None  # the decode batch size it is judged at (names.json batch_sizes); None: no attention
    # the quantised KV-cache preset it is judged in (names.json kv_quant: "turboquant_k8v4", ...);
    # "" for the plain cache (bf16 / fp8 by its dtype variants)
    kv_quant: str = ""
    # the decode context-parallel group size it is judged at (names.json dcp; rank 0); None: no DCP
    dcp: int | None = None
    # the token rows of the prefill chunk it is judged at (names.json token_rows; variant "rows");
    # None: decode rows, one per request of its batch
    rows: int | None = None

    @property
    def label(self) -> str:
        """``scenario NAME`` (and the MLA role when it is not the absorbed one, the quantisation
        scheme when it is not the unquantised one)."""
        out = f"scenario {self.name}"
        if self.role == "prefill":
            out += " (MLA prefill as multi-head attention)"
        if self.quant and self.quant != "none":
            out += f" (quant {self.quant})"
        if self.kv_quant:
            out += f" (kv cache {self.kv_quant})"
        if self.dcp:
            out += f" (decode context parallel {self.dcp}, rank 0)"
        if self.rows is not None:
            out += f" (prefill chunk of {self.rows} token rows)"
        return out

    def applies(self, path: str) -> bool:
        """Does this scenario judge a launch in the module at ``path``? An MLA role judges only
        the kernel families that run it (:func:`launch_roles`); other scenarios judge every launch."""
        return not self.role or self.role in launch_roles(path)

    def dimension(self, name: str) -> tuple[bool, Any]:
        """(found, value) of a model dimension or optional feature named ``name`` (a local, a
        parameter without a default or an attribute whose value is computed at run time)."""
        if name in self.dims:
            return True, self.dims[name]
        return False, None

    def expression(self, node: ast.expr) -> tuple[bool, Any]:
        """(found, value) for a tensor-shape expression (``q.shape[1]``, ``k.size(-1)``)."""
        for text in expression_keys(node):
            if text in self.values:
                return True, self.values[text]
        return False, None

    def parameter(self, name: str) -> tuple[bool, Any]:
        if name in self.values:
            return True, self.values[name]
        return False, None

    def dtypes_of(self, tensor: str) -> tuple[str, ...]:
        """Every dtype the scenario gives the tensor named ``tensor`` (case-insensitively), () if none."""
        low = tensor.lower()
        for key, dts in self.dtypes.items():
            if low in (n.strip().lower() for n in key.split(",")):
                return tuple(dts)
        return ()

    def dtype_of(self, tensor: str) -> str | None:
        """The one dtype the scenario gives the tensor named ``tensor`` (``q``: the activation
        dtype), else None (none, or several: the variants decide)."""
        low = tensor.lower()
        for key, dts in self.dtypes.items():
            if low in (n.strip().lower() for n in key.split(",")):
                return dts[0] if len(dts) == 1 else None
        return None

    def table_for(self, pointer_names) -> dict[str, list]:
        """A ``[tool.tilefit.kernels]``-style table of a kernel whose pointer parameters are
        ``pointer_names``: the scenario's dtypes of the ones it names (case-insensitively)."""
        lower = {p.lower(): p for p in pointer_names}
        out: dict[str, list] = {}
        for key, dts in self.dtypes.items():
            names = [lower[n.strip().lower()] for n in key.split(",") if n.strip().lower() in lower]
            if names:
                out[",".join(dict.fromkeys(names))] = list(dts)
        return out


def expression_keys(node: ast.expr) -> tuple[str, ...]:
    """:func:`expression_key`, and for an element unpacked from a shape of known rank
    (``t, h, d = q.shape``: ``d`` is ``q.shape[2]`` and ``q.shape[-1]``) its negative index too."""
    key = expression_key(node)
    if key is None:
        return ()
    rank = getattr(node, "_tilefit_rank", None)
    index = _index(node.slice) if isinstance(node, ast.Subscript) else None
    if rank is not None and index is not None and index >= 0:
        return key, key.rsplit("[", 1)[0] + f"[{index - rank}]"
    return (key,)


def expression_key(node: ast.expr) -> str | None:
    """``q.shape[1]`` -> ``"q.shape[1]"``; ``k.size(-1)`` -> ``"k.shape[-1]"``; ``c.numel()`` ->
    ``"c.numel()"``; ``g.world_size`` -> ``"g.world_size"`` (an attribute of a name); else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numel" \
            and isinstance(node.func.value, ast.Name) and not node.args and not node.keywords:
        return f"{node.func.value.id}.numel()"
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, ast.Name):
        index = _index(node.slice)
        return f"{node.value.value.id}.shape[{index}]" if index is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords:
        index = _index(node.args[0])
        return f"{node.func.value.id}.shape[{index}]" if index is not None else None
    return None


def _index(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int):
        return -node.operand.value
    return None


def from_facts(name: str, facts: Mapping[str, Any], description: str = "", source: str = "") -> Scenario:
    """Bindings of the tensor names engines use, from model facts (sizes per rank)."""
    unknown = set(facts) - _FACTS
    if unknown:
        raise ScenarioError(f"scenario {name}: unknown facts {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(sorted(_FACTS))})")
    values: dict[str, Any] = {}
    dtypes: dict[str, tuple[str, ...]] = {}
    heads, kv_heads = facts.get("heads"), facts.get("kv_heads")
    mla = facts.get("kv_lora_rank") is not None and facts.get("qk_rope_head_dim") is not None
    if mla:
        hk = int(facts["kv_lora_rank"]) + int(facts["qk_rope_head_dim"])
        hv = int(facts["kv_lora_rank"])
        kv_heads = 1 if kv_heads is None else kv_heads
    else:
        hk = facts.get("head_dim")
        hv = facts.get("v_head_dim", hk)
    if heads is not None:
        for q in Q_NAMES:
            values[f"{q}.shape[1]"] = values[f"{q}.shape[-2]"] = int(heads)
            if hk is not None:
                values[f"{q}.shape[2]"] = values[f"{q}.shape[-1]"] = int(hk)
        values.update(num_heads=int(heads), num_q_heads=int(heads), q_head_num=int(heads))
    for names, dim in ((K_NAMES, hk), (V_NAMES, hv)):
        for t in names:
            if kv_heads is not None:
                values[f"{t}.shape[-2]"] = int(kv_heads)
            if dim is not None:
                values[f"{t}.shape[-1]"] = int(dim)
    for t, dim in (("key", hk), ("value", hv)):  # vLLM's new tokens' K and V: [tokens, kv_heads, head size]
        if kv_heads is not None:
            values[f"{t}.shape[1]"] = int(kv_heads)
        if dim is not None:
            values[f"{t}.shape[2]"] = int(dim)
    if kv_heads is not None:
        values.update(num_kv_heads=int(kv_heads))
    if hk is not None:
        values.update(head_dim=int(hk), head_size=int(hk))
    if mla:
        values.update(kv_lora_rank=int(facts["kv_lora_rank"]), qk_rope_head_dim=int(facts["qk_rope_head_dim"]))
    if heads is not None or mla:
        values["is_mla"] = bool(mla)
    for key in ("num_kv_splits", "page_size"):
        if facts.get(key) is not None:
            values[key] = int(facts[key])
    if heads is not None:  # attention soft-capping: off unless the model has it (Gemma 2: 50.0)
        values["logit_cap"] = float(facts.get("logit_cap", 0.0))
    if facts.get("experts"):
        e, n, k, top = (int(facts[x]) if facts.get(x) is not None else None
                        for x in ("experts", "moe_intermediate", "hidden", "top_k"))
        values.update(num_experts=e, E=e)
        for w in ("w1", "w13", "w13_weight"):
            values[f"{w}.shape[0]"] = e
            if n is not None:
                values[f"{w}.shape[1]"] = 2 * n
            if k is not None:
                values[f"{w}.shape[2]"] = values[f"{w}.shape[-1]"] = k
        for w in ("w2", "w2_weight"):
            values[f"{w}.shape[0]"] = e
            if k is not None:
                values[f"{w}.shape[1]"] = k
            if n is not None:
                values[f"{w}.shape[2]"] = values[f"{w}.shape[-1]"] = n
        if top is not None:
            values.update(top_k=top, topk=top)
            # [tokens, top_k] routing tensors (vLLM's EP scatter/gather get them as recv_topk*)
            for t in ("topk_ids", "topk_weights", "recv_topk", "recv_topk_ids", "recv_topk_weight"):
                values[f"{t}.shape[1]"] = top
        if k is not None:
            values.update(hidden_size=k)
            for a in ("hidden_states", "A", "a"):
                values[f"{a}.shape[1]"] = values[f"{a}.shape[-1]"] = k
    values.update(dsa_kpool_values(facts))
    values.update(serving_size_values(facts))
    qsa = qsa_dimensions(facts)
    if qsa:  # the compressed blocks a row selects (SGLang expands them only at that width)
        values["block_indices.shape[1]"] = values["block_indices.shape[-1]"] = qsa["qsa_block_topk"]
        # int32 tensors of SGLang 0.5.23's QSA expansion (qsa/kernel.py): fast_topk_v2's block
        # indices, the metadata's decode_logical_positions and get_seqlens_int32()
        dtypes["block_indices,query_positions,sequence_lengths"] = ("i32",)
        values.update(qsa_index_cache_values(facts, dtypes))
    kv = facts.get("kv_dtypes")
    if kv:
        dtypes[",".join(KV_POINTERS)] = tuple(str(d) for d in kv)
        values.update(packed_layout_values(tuple(str(d) for d in kv)))
    act = facts.get("activation_dtype", "bf16")
    dtypes[",".join(Q_POINTERS)] = (str(act),)
    schemes = quant_schemes(facts)
    if facts.get("experts") and schemes and quant_scheme(schemes[0])["values"].get("quant_dtype") is None:
        # unquantised activations (no quant, or weight-only): the MoE input is the model's dtype
        # everywhere (with fp8/int8 activations it is the quantised one inside the experts only)
        dtypes["hidden_states"] = (str(act),)
    batches = batch_sizes(facts)
    if batches:
        for e in batch_expressions():
            values[e] = batches[0]
        rows = names_table()["token_rows"].get("int32_pointers", ())
        if rows:  # the per-row counts and offsets of the token-row launchers (names.json token_rows)
            dtypes[",".join(rows)] = ("i32",)
    return Scenario(name, values, dtypes, description, source, dimensions(facts), dict(facts),
                    "absorbed" if mla else "", quant_schemes(facts)[0] if quant_schemes(facts) else "",
                    batch=batches[0] if batches else None)


def serving_size_values(facts: Mapping[str, Any]) -> dict[str, int]:
    """The shapes that hold the serving sizes among ``facts`` (names.json ``serving_sizes``:
    request slots, page-table columns per request), each a positive integer; {} without them."""
    out: dict[str, int] = {}
    for expr, fact in names_table()["serving_sizes"]["expressions"].items():
        value = facts.get(fact)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"fact {fact} must be a positive integer, not {value!r}")
        out[expr] = value
    return out


def packed_layout_values(kv_dtypes: tuple[str, ...]) -> dict[str, PerDtype]:
    """The KV-cache dimensions that pack a fixed number of bytes (names.json ``packed_layouts``:
    vLLM's head-major 5-D key cache, ``x = 16 // element size``), per KV dtype."""
    from tilefit.dtypes import ELEMENT_BYTES

    out: dict[str, PerDtype] = {}
    for expr, nbytes in names_table().get("packed_layouts", {}).get("expressions", {}).items():
        tensor = expr.split(".", 1)[0]
        out[expr] = PerDtype(tensor, tuple((dt, int(nbytes) // ELEMENT_BYTES[dt]) for dt in kv_dtypes
                                           if dt in ELEMENT_BYTES))
    return out


def dsa_kpool_values(facts: Mapping[str, Any]) -> dict[str, int]:
    """The tensor shapes of a DSA indexer with pooled keys (facts ``index_kpool``,
    ``index_page_size``, ``index_head_dim``, ``tail_extra_slots``), as SGLang 0.5.23 allocates them
    and srt/layers/attention/dsa/kpool_fp8_index.py names them: ``buf``, a layer's index-K cache
    viewed one index page a row (mem_cache/index_key_cache.py: ``page_size // index_kpool`` tokens of
    ``index_head_dim`` fp8 bytes plus a 4-byte fp32 scale per 128-wide quantisation block,
    DSATokenToKVPool.quant_block_size), and ``tail_k``, the per-request tail
    (memory_pool.py ``_init_kpool_compress_tail_buffers``: [requests, index_kpool +
    tail_extra_slots, index_head_dim]), and ``slot_k``, the keys of one pool per row
    (dsa_indexer_kpool.py: [rows, index_kpool, index_head_dim], asserted equal in shape to the
    [index_kpool, head_dim] ``index_kpool_compress_ape``), and with fact ``index_topk``
    ``topk_result``, the pooled selection expanded to tokens (kpool_fp8_index.py
    expand_pooled_groups_to_topk: [rows, index_topk]). {} without the facts."""
    if facts.get("index_kpool") is None:
        return {}
    missing = [k for k in ("index_page_size", "index_head_dim") if facts.get(k) is None]
    if missing:
        raise ScenarioError(f"fact index_kpool needs {' and '.join(missing)} too")
    kpool = int(facts["index_kpool"])
    page = int(facts["index_page_size"])
    dim = int(facts["index_head_dim"])
    tail = kpool + int(facts.get("tail_extra_slots", 0))
    return {"buf.shape[1]": page * (dim + dim // 128 * 4), "buf.shape[-1]": page * (dim + dim // 128 * 4),
            "tail_k.shape[1]": tail, "tail_k.shape[2]": dim, "tail_k.shape[-1]": dim,
            "slot_k.shape[1]": kpool, "slot_k.shape[2]": dim, "slot_k.shape[-1]": dim,
            **({"topk_result.shape[1]": int(facts["index_topk"]), "topk_result.shape[-1]": int(facts["index_topk"])}
               if facts.get("index_topk") is not None else {})}


QSA_INDEXER_DTYPES = ("bf16", "fp8e4nv")  # SGLang 0.5.23 qsa_kv_pool.py: --qsa-indexer-dtype auto/bfloat16, fp8_e4m3


def qsa_index_cache_values(facts: Mapping[str, Any], dtypes: dict) -> dict[str, int]:
    """The compressed QSA index-key cache (facts ``qsa_index_kv_heads``, ``qsa_index_head_dim``,
    ``qsa_indexer_dtypes``) as SGLang 0.5.23 allocates it (mem_cache/qsa_kv_pool.py
    QSATokenToKVPool: a layer's ``[compressed slots, index kv heads, index head dim]`` view, dtype
    ``--qsa-indexer-dtype``) and qsa/kernel.py gather_qsa_compressed_keys names it
    (``compressed``): its shape bound, its dtypes added to ``dtypes``. qsa/config.py requires one
    index KV head. {} without the facts."""
    if facts.get("qsa_index_head_dim") is None:
        return {}
    heads, dim = int(facts.get("qsa_index_kv_heads", 1)), int(facts["qsa_index_head_dim"])
    if heads != 1:
        raise ScenarioError(f"fact qsa_index_kv_heads must be 1 (SGLang's QSA MQA operators require it), not {heads}")
    kinds = facts.get("qsa_indexer_dtypes", ["bf16"])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    bad = [d for d in kinds if d not in QSA_INDEXER_DTYPES]
    if bad or not kinds:
        raise ScenarioError(f"fact qsa_indexer_dtypes: {bad[0] if bad else kinds!r} is not one of "
                            f"{', '.join(QSA_INDEXER_DTYPES)}")
    dtypes["compressed"] = tuple(dict.fromkeys(kinds))
    return {"compressed.shape[1]": heads, "compressed.shape[2]": dim, "compressed.shape[-1]": dim}


QSA_BLOCK_TOPK = (512, 2048)  # SGLang 0.5.23 qsa/config.py: the widths fast_topk_v2 supports


def qsa_dimensions(facts: Mapping[str, Any]) -> dict[str, int]:
    """A compressed sparse-attention indexer's sizes (facts ``qsa_compress_ratio``,
    ``qsa_budget``, with ``page_size``), checked as SGLang 0.5.23's parse_qsa_profile checks them:
    ratio at least 2, the budget a multiple of it, ``budget // ratio`` one of
    :data:`QSA_BLOCK_TOPK`. {} without the facts."""
    if facts.get("qsa_compress_ratio") is None and facts.get("qsa_budget") is None:
        return {}
    try:
        ratio, budget = int(facts["qsa_compress_ratio"]), int(facts["qsa_budget"])
    except (KeyError, TypeError, ValueError):
        raise ScenarioError("facts qsa_compress_ratio and qsa_budget go together (integers)") from None
    if ratio < 2 or budget % ratio or budget // ratio not in QSA_BLOCK_TOPK:
        raise ScenarioError(f"QSA budget {budget} / compress ratio {ratio}: the ratio must be at least 2 and "
                            f"the budget a multiple of it giving {' or '.join(map(str, QSA_BLOCK_TOPK))} blocks")
    out = {"qsa_compress_ratio": ratio, "qsa_budget": budget, "qsa_block_topk": budget // ratio}
    if facts.get("page_size") is not None:
        out["qsa_compressed_page_size"] = int(facts["page_size"]) // ratio
    return out


def infllm_dimensions(facts: Mapping[str, Any]) -> dict[str, int]:
    """MiniCPM's InfLLM v2 compressed keys (facts ``infllm_kernel_size``, ``infllm_kernel_stride``:
    the config's sparse_config), at both levels as SGLang 0.5.23's minicpm backend derives them
    (the second level 4 x the first), checked as it checks them (positive, the stride dividing
    the size). {} without the facts."""
    if facts.get("infllm_kernel_size") is None and facts.get("infllm_kernel_stride") is None:
        return {}
    try:
        size, stride = int(facts["infllm_kernel_size"]), int(facts["infllm_kernel_stride"])
    except (KeyError, TypeError, ValueError):
        raise ScenarioError("facts infllm_kernel_size and infllm_kernel_stride go together (integers)") from None
    if size <= 0 or stride <= 0 or size % stride:
        raise ScenarioError(f"InfLLM kernel size {size} / stride {stride}: both positive, the stride dividing the size")
    return {"infllm_k1_kernel_size": size, "infllm_k1_kernel_stride": stride,
            "infllm_k2_kernel_size": 4 * size, "infllm_k2_kernel_stride": 4 * stride}


def batch_sizes(facts: Mapping[str, Any]) -> tuple[int, ...]:
    """The decode batch sizes of an attention scenario (fact ``batch_sizes``, else names.json's
    default); () for a model without attention facts."""
    if facts.get("batch_sizes") is not None:
        got = facts["batch_sizes"]
        got = [got] if isinstance(got, int) else got
        if not got or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in got):
            raise ScenarioError(f"fact batch_sizes must be positive integers, not {facts['batch_sizes']!r}")
        return tuple(dict.fromkeys(got))
    if facts.get("heads") is None and facts.get("head_dim") is None and facts.get("kv_lora_rank") is None:
        return ()
    return tuple(names_table()["batch_sizes"]["default"])


@lru_cache(maxsize=None)
def batch_keys() -> frozenset:
    """The names and shape expressions of the batch dimension (names.json), with the token rows
    of a decode forward (one per request)."""
    data = names_table()
    return frozenset(data["dimensions"]["batch"]["names"]) | frozenset(batch_expressions())


def batch_expressions() -> tuple[str, ...]:
    """The shape expressions a batch size binds: tensors with one row per request
    (names.json batch_sizes) and a decode forward's per-token tensors (token_rows)."""
    data = names_table()
    return tuple(dict.fromkeys([*data["batch_sizes"]["expressions"], *data["token_rows"]["expressions"]]))


@lru_cache(maxsize=None)
def row_keys() -> frozenset:
    """The shape expressions of a forward's token rows (names.json token_rows)."""
    return frozenset(names_table()["token_rows"]["expressions"])


def prefill_rows(facts: Mapping[str, Any]) -> tuple[int, ...]:
    """The prefill-chunk row counts an attention scenario is judged at besides its decode batch
    sizes (fact ``prefill_rows``, else names.json token_rows ``prefill``: SGLang's default
    --chunked-prefill-size per GPU memory); () for a model without attention facts."""
    if not batch_sizes(facts):
        return ()
    got = facts.get("prefill_rows", names_table()["token_rows"]["prefill"])
    got = [got] if isinstance(got, int) else got
    if not isinstance(got, (list, tuple)) or \
            not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in got):
        raise ScenarioError(f"fact prefill_rows must be positive integers, not {facts['prefill_rows']!r}")
    return tuple(dict.fromkeys(got))


def quant_schemes(facts: Mapping[str, Any]) -> tuple[str, ...]:
    """The quantisation schemes (names.json ``quant``) fact ``quant`` lists (a name or a list),
    checked against the table; () without the fact."""
    return _listed_names(facts, "quant", "quantisation scheme")


def _listed_names(facts: Mapping[str, Any], fact: str, what: str) -> tuple[str, ...]:
    """The names fact ``fact`` lists (a name or a list), each one of names.json's
    ``<fact>.schemes``, in order without repeats; () without the fact."""
    q = facts.get(fact)
    if q is None:
        return ()
    names = (q,) if isinstance(q, str) else tuple(q)
    known = names_table().get(fact, {}).get("schemes", {})
    bad = [n for n in names if not isinstance(n, str) or n not in known]
    if bad or not names:
        raise ScenarioError(f"unknown {what} {bad[0] if bad else q!r} in fact {fact} "
                            f"(known: {', '.join(known)})")
    return tuple(dict.fromkeys(names))


def quant_scheme(name: str) -> dict:
    """names.json ``quant.schemes[name]`` (description, doctor, values)."""
    return names_table()["quant"]["schemes"][name]


def launch_roles(path: str) -> tuple[str, ...]:
    """The MLA roles a launch in the module at ``path`` takes (names.json ``mla_roles``: the
    first family that lists the file's name, else the default)."""
    text = str(path).replace("\\", "/")
    text = text[:-3] if text.endswith(".py") else text
    stem = text.rsplit("/", 1)[-1]
    for entry, roles in _roles_by_file():
        if ("/" in entry and (text == entry or text.endswith("/" + entry))) or entry == stem:
            return roles
    return _roles_default()


@lru_cache(maxsize=None)
def _roles_by_file() -> tuple[tuple[str, tuple[str, ...]], ...]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for fam in names_table().get("mla_roles", {}).get("families", ()):
        for f in fam["files"]:
            out.append((f, tuple(fam["roles"])))
    # paths first: `vllm/.../ultraquant/triton_store` before any plain file name
    return tuple(sorted(out, key=lambda e: "/" not in e[0]))


@lru_cache(maxsize=None)
def _roles_default() -> tuple[str, ...]:
    return tuple(names_table().get("mla_roles", {}).get("default", ("absorbed",)))


def prefill_facts(facts: Mapping[str, Any]) -> dict[str, Any] | None:
    """An MLA model's facts for its prefill as multi-head attention (every query head its own K/V
    head; Q/K ``qk_nope_head_dim + qk_rope_head_dim``, V ``v_head_dim``, else ``qk_nope_head_dim``);
    None when the facts do not say the non-rotary part."""
    nope, rope = facts.get("qk_nope_head_dim"), facts.get("qk_rope_head_dim")
    if nope is None or rope is None or facts.get("kv_lora_rank") is None:
        return None
    out = {k: v for k, v in facts.items() if k not in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim")}
    out["head_dim"] = int(nope) + int(rope)
    out["v_head_dim"] = int(facts.get("v_head_dim") or nope)
    if facts.get("heads") is not None:
        out["kv_heads"] = int(facts["heads"])
    return out


def with_roles(scenarios) -> list[Scenario]:
    """``scenarios``, each MLA one followed by its prefill role (:func:`prefill_facts`): the two
    shapes its attention runs in, each judging only the kernel families of that role."""
    out: list[Scenario] = []
    for s in scenarios:
        out.append(s)
        if s.role != "absorbed":
            continue
        facts = prefill_facts(s.facts)
        if facts is None:
            continue
        p = from_facts(s.name, facts, s.description, s.source)
        out.append(Scenario(s.name, p.values, dict(s.dtypes), s.description, s.source, p.dims, facts, "prefill",
                            p.quant, batch=p.batch))
    for s in list(out):  # each further quantisation scheme of a model: a variant of it
        if s.role == "prefill":
            continue
        for q in quant_schemes(s.facts)[1:]:
            v = from_facts(s.name, {**s.facts, "quant": [q]}, s.description, s.source)
            out.append(Scenario(s.name, dict(s.values), dict(v.dtypes), s.description, s.source, v.dims,
                                {**s.facts, "quant": [q]}, s.role, q, "quant", s.batch))
    for s in [x for x in out if not x.variant and x.role != "prefill"]:  # each quantised KV-cache preset
        for preset in kv_quant_presets(s.facts):
            values, dims = kv_quant_values(preset, s.dims.get("head_dim"))
            out.append(Scenario(s.name, {**s.values, **values}, dict(s.dtypes), s.description, s.source,
                                {**s.dims, **dims}, dict(s.facts), s.role, s.quant, "kv_quant", s.batch, preset))
    names = names_table()["dimensions"]["batch"]["names"]
    exprs = batch_expressions()
    for s in [x for x in out if not x.variant and x.role != "prefill"]:  # each DCP size, at each batch size
        for n in dcp_sizes(s.facts):
            values, dims = dcp_values(n, s.dims)
            dtypes = {**s.dtypes, ",".join(names_table()["dcp"].get("activation_tensors", ())):
                      (str(s.facts.get("activation_dtype", "bf16")),)}
            for b in batch_sizes(s.facts) or (None,):
                bv = dict.fromkeys(exprs, b) if b is not None else {}
                bd = dict.fromkeys(names, b) if b is not None else {}
                out.append(Scenario(s.name, {**s.values, **values, **bv}, dtypes, s.description, s.source,
                                    {**s.dims, **dims, **bd}, dict(s.facts), s.role, s.quant, "dcp", b, dcp=n))
    for s in [x for x in out if not x.variant]:  # each further batch size: a variant (every role)
        for b in batch_sizes(s.facts)[1:]:
            out.append(Scenario(s.name, {**s.values, **dict.fromkeys(exprs, b)}, dict(s.dtypes), s.description,
                                s.source, {**s.dims, **dict.fromkeys(names, b)}, {**s.facts, "batch_sizes": [b]},
                                s.role, s.quant, "batch", b))
    rows = names_table()["token_rows"]["expressions"]
    for s in [x for x in out if not x.variant]:  # each prefill chunk: a variant of the launches that read rows
        for r in prefill_rows(s.facts):
            out.append(Scenario(s.name, {**s.values, **dict.fromkeys(rows, r)}, dict(s.dtypes), s.description,
                                s.source, dict(s.dims), {**s.facts, "prefill_rows": [r]}, s.role, s.quant, "rows",
                                s.batch, rows=r))
    return out


def dcp_sizes(facts: Mapping[str, Any]) -> tuple[int, ...]:
    """The decode context-parallel sizes of fact ``dcp_sizes`` (names.json ``dcp``), each at least
    2 and dividing fact ``tp`` as both engines require; () without the fact."""
    got = facts.get("dcp_sizes")
    if got is None:
        return ()
    got = [got] if isinstance(got, int) else got
    tp = facts.get("tp", 1)
    if not isinstance(got, (list, tuple)) or not got or \
            not all(isinstance(n, int) and not isinstance(n, bool) and n >= 2 for n in got):
        raise ScenarioError(f"fact dcp_sizes must be integers of at least 2, not {facts['dcp_sizes']!r}")
    bad = [n for n in got if not isinstance(tp, int) or tp % n]
    if bad:
        raise ScenarioError(f"decode context-parallel size {bad[0]} does not divide the tensor-parallel size "
                            f"{tp} (vLLM and SGLang require it to)")
    return tuple(dict.fromkeys(got))


def dcp_values(size: int, dims: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(values, dims) a decode context-parallel group of ``size`` ranks binds (names.json ``dcp``),
    for a scenario whose model dimensions are ``dims``: the group's size and rank 0 by their
    names, the group's buffers' shapes by ``expressions`` and the launchers' ``parameters`` (what
    one cannot say -- a scenario without heads -- stays unbound)."""
    data = names_table()
    out_dims = {**dict.fromkeys(data["dimensions"]["dcp_size"]["names"], size),
                **dict.fromkeys(data["dimensions"]["dcp_rank"]["names"], 0)}
    heads = dims.get("num_heads")
    facts = {"dcp_size": size, "heads": heads, "gathered_heads": heads * size if heads is not None else None,
             "v_head_dim": dims.get("v_head_dim")}
    values: dict[str, Any] = {expr: facts[what] for table in ("parameters", "expressions")
                              for expr, what in data["dcp"].get(table, {}).items() if facts[what] is not None}
    for name in data["dcp"].get("optional_tensors", ()):
        values[name] = GivenTensor(f"a decode context-parallel combine may pass (DCP {size}: given or None)")
    return values, out_dims


@lru_cache(maxsize=None)
def dcp_vocabulary() -> frozenset:
    """The names and expressions only a decode context-parallel variant binds (names.json)."""
    data = names_table()
    return frozenset(data["dimensions"]["dcp_size"]["names"]) | frozenset(data["dimensions"]["dcp_rank"]["names"]) \
        | frozenset(data["dcp"]["expressions"])


def dimensions(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Identifier -> value of the model dimensions and optional features ``facts`` give, by the
    names engines use for them (:data:`NAMES`). Facts a scenario does not have bind nothing."""
    data = names_table()
    heads, kv_heads = facts.get("heads"), facts.get("kv_heads")
    mla = facts.get("kv_lora_rank") is not None and facts.get("qk_rope_head_dim") is not None
    batches = batch_sizes(facts)
    dims: dict[str, Any] = {"batch": batches[0]} if batches else {}
    dims.update({k: facts[k] for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "block_size",
                                                 "page_size", "num_kv_splits", "experts", "top_k", "hidden",
                                                 "moe_intermediate", "tp", "index_kpool", "index_page_size",
                                                 "index_head_dim", "tail_extra_slots", "num_draft_tokens")
                 if facts.get(k) is not None})
    dims.update(qsa_dimensions(facts))
    dims.update(infllm_dimensions(facts))
    if heads is not None:
        dims["heads"] = int(heads)
    if mla:
        dims["head_dim"] = int(facts["kv_lora_rank"]) + int(facts["qk_rope_head_dim"])
        dims["v_head_dim"] = int(facts["kv_lora_rank"])
        kv_heads = 1 if kv_heads is None else kv_heads
    elif facts.get("head_dim") is not None:
        dims["head_dim"] = int(facts["head_dim"])
        dims["v_head_dim"] = int(facts.get("v_head_dim", facts["head_dim"]))
    if kv_heads is not None:
        dims["kv_heads"] = int(kv_heads)
        if heads is not None:
            dims["queries_per_kv"] = max(1, int(heads) // int(kv_heads))
    out: dict[str, Any] = {}
    for dim, entry in data["dimensions"].items():
        if dim in dims:
            for ident in entry["names"]:
                out[ident] = dims[dim]
    if heads is not None or facts.get("head_dim") is not None or mla:  # an attention model: its features
        for ident, entry in data["features"].items():
            if ident == "$comment":
                continue
            value = facts.get(entry["fact"]) if "fact" in entry else None
            if value is None:
                out[ident] = list(entry["value"]) if isinstance(entry["value"], list) else entry["value"]
            elif entry.get("present") == "window":  # (left, right) of a sliding window of `value` tokens
                out[ident] = [int(value) - 1, 0]
            else:
                out[ident] = value
    schemes = quant_schemes(facts)
    if schemes:  # the attributes of the (first) quantisation scheme of the MoE experts
        out.update(quant_scheme(schemes[0])["values"])
    return out


def kv_quant_presets(facts: Mapping[str, Any]) -> tuple[str, ...]:
    """The quantised KV-cache presets (names.json ``kv_quant``) fact ``kv_quant`` lists (a name or
    a list), checked against the table; () without the fact."""
    return _listed_names(facts, "kv_quant", "KV-cache preset")


def kv_quant_values(preset: str, head_dim: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(values, dims) a quantised KV-cache preset binds for head size ``head_dim`` (names.json
    ``kv_quant``, as vLLM 0.33.0's TurboQuantConfig derives them): ``values`` win over a
    parameter's default (``key_fp8=False``, ``norm_correction=False`` of the launchers; the
    backend passes the preset's) and bind ``centroids.numel()``; ``dims`` stand for what nothing
    static gives (the launchers' ``mse_bits``, ``key_packed_size``, ... without defaults, and the
    backend's ``self.tq_config.*`` attributes). A scenario without a head size binds the flags only."""
    entry = names_table()["kv_quant"]["schemes"][preset]
    kbits, vbits, nc = int(entry["key_quant_bits"]), int(entry["value_quant_bits"]), bool(entry["norm_correction"])
    key_fp8 = kbits == 8
    key_mse_bits = 0 if key_fp8 else kbits
    centroid_bits = vbits if key_fp8 else kbits
    values: dict[str, Any] = {"key_fp8": key_fp8, "norm_correction": nc, "centroids.numel()": 2 ** centroid_bits}
    dims: dict[str, Any] = {"key_fp8": key_fp8, "norm_correction": nc, "mse_bits": key_mse_bits,
                            "key_mse_bits": key_mse_bits, "value_quant_bits": vbits,
                            "effective_value_quant_bits": vbits, "centroid_bits": centroid_bits,
                            "n_centroids": 2 ** centroid_bits}
    if head_dim:
        d = int(head_dim)
        dims["key_packed_size"] = d if key_fp8 else -(-d * key_mse_bits // 8) + 2
        dims["value_packed_size"] = -(-d * vbits // 8) + 4
        dims["scale"] = d ** -0.5  # the layer's softmax scale the backend passes (self.scale)
    return values, dims


@lru_cache(maxsize=None)
def kv_quant_vocabulary() -> frozenset:
    """The launch parameters only a quantised KV-cache preset gives (names.json ``kv_quant``
    ``launch_names``): a plain cache has none of them."""
    return frozenset(names_table().get("kv_quant", {}).get("launch_names", ()))


@lru_cache(maxsize=None)
def quant_vocabulary() -> frozenset:
    """Every attribute a quantisation scheme binds (names.json ``quant``)."""
    return frozenset(n for e in names_table().get("quant", {}).get("schemes", {}).values() for n in e["values"])


@lru_cache(maxsize=None)
def vocabulary() -> frozenset:
    """Every identifier :data:`NAMES` gives a dimension or feature (a scenario without that fact
    is a model without that dimension: :class:`~tilefit.callsites.values.Absent`)."""
    data = names_table()
    return frozenset(n for e in data["dimensions"].values() for n in e["names"]) | \
        frozenset(k for k in data["features"] if k != "$comment") | quant_vocabulary() | kv_quant_vocabulary()


@lru_cache(maxsize=None)
def names_table() -> dict:
    """:data:`NAMES`, validated against its schema (a malformed shipped file is a bug: it raises)."""
    from tilefit.device_db.validation import first_error

    data = json.loads(NAMES.read_text(encoding="utf-8"))
    error = first_error(NAMES.with_name("names.schema.json").read_bytes(), data)
    if error is not None:
        raise ValueError(f"{NAMES}: {error[0]}: {error[1]}")
    seen: dict[str, str] = {}
    for dim, entry in data["dimensions"].items():
        for ident in entry["names"]:
            if ident in seen:
                raise ValueError(f"{NAMES}: {ident} names both {seen[ident]} and {dim}")
            seen[ident] = dim
    schemes = data.get("quant", {}).get("schemes", {})
    bound = {frozenset(e["values"]) for e in schemes.values()}
    if len(bound) > 1:  # a name one scheme leaves out would read as a dimension the model lacks
        raise ValueError(f"{NAMES}: the quantisation schemes do not all bind the same names")
    for ident in (next(iter(bound)) if bound else ()):
        if ident in seen:
            raise ValueError(f"{NAMES}: {ident} names both {seen[ident]} and a quantisation attribute")
    return data


def from_model_shape(shape, name: str, tp: int = 1) -> Scenario:
    """A scenario from a model's shape (:class:`tilefit.doctor.model.ModelShape`, read from its
    ``config.json``): heads and MoE sizes divided by ``tp``."""
    facts: dict[str, Any] = {"tp": tp}
    heads = getattr(shape, "num_attention_heads", None)
    if heads:
        facts["heads"] = max(1, heads // tp)
    kv = getattr(shape, "num_key_value_heads", None)
    if getattr(shape, "kv_lora_rank", None) and getattr(shape, "qk_rope_head_dim", None) is not None:
        facts.update(kv_lora_rank=shape.kv_lora_rank, qk_rope_head_dim=shape.qk_rope_head_dim, kv_heads=1)
        if getattr(shape, "qk_nope_head_dim", None):
            facts["qk_nope_head_dim"] = shape.qk_nope_head_dim
        if getattr(shape, "v_head_dim", None):
            facts["v_head_dim"] = shape.v_head_dim
    else:
        if kv:
            facts["kv_heads"] = max(1, kv // tp)
        head_dim = getattr(shape, "head_dim", None)
        if head_dim is None and heads and getattr(shape, "hidden_size", None):
            head_dim = shape.hidden_size // heads
        if head_dim:
            facts["head_dim"] = head_dim
    kv_dtype = getattr(shape, "kv_cache_dtype", None)
    facts["kv_dtypes"] = [kv_dtype] if kv_dtype else ["bf16", "fp8e4nv"]
    facts["num_kv_splits"] = 4 if "kv_lora_rank" in facts else 8
    facts["page_size"] = 1
    facts["block_size"] = 16  # vLLM's default KV-cache block on CUDA
    if getattr(shape, "is_moe", False):
        facts.update(experts=shape.num_experts, moe_intermediate=max(1, shape.moe_intermediate_size // tp),
                     hidden=shape.hidden_size)
        if shape.top_k:
            facts["top_k"] = shape.top_k
        scheme = _scheme_of(getattr(shape, "quant", None))
        if scheme is not None:  # the checkpoint's own scheme of its experts (else their quant attributes stay unbound)
            facts["quant"] = [scheme]
    return from_facts(name, facts, f"from {getattr(shape, 'source', name)}", str(getattr(shape, "source", "")))


def _scheme_of(quant) -> str | None:
    """The names.json ``quant`` scheme of a model's :class:`tilefit.doctor.model.Quant` (its dtype
    path, scheme and block or group), or None when none is that one."""
    if quant is None or getattr(quant, "unsupported", None):
        return None
    if not quant.is_quantised:
        return "none"
    for name, entry in names_table().get("quant", {}).get("schemes", {}).items():
        d = entry["doctor"]
        block = tuple(d["block_shape"]) if d.get("block_shape") else None
        if d["dtype"] == quant.dtype and d["scheme"] == quant.scheme and \
                block == (tuple(quant.block_shape) if quant.block_shape else None):
            return name
    return None


@lru_cache(maxsize=None)
def builtin() -> dict[str, Scenario]:
    """The shipped scenarios, by name."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    if data.get("version") != 1 or not isinstance(data.get("scenarios"), dict):
        raise ScenarioError(f"{DATA}: not a version-1 scenarios file")
    return {name: from_facts(name, entry["facts"], entry.get("description", ""), str(DATA))
            for name, entry in data["scenarios"].items()}


def from_table(name: str, table: Mapping[str, Any], source: str = "pyproject.toml") -> Scenario:
    """``[tool.tilefit.scenarios.NAME]``: ``facts = {...}`` (as the shipped ones), ``extends =
    "shipped-name"``, expression or parameter bindings (``"q.shape[1]" = 16``, ``num_kv_splits =
    4``) and ``dtypes = {"k_buffer,v_buffer" = ["bf16", "fp8e4nv"]}``."""
    where = f"{source}: [tool.tilefit.scenarios.{name}]"
    if not isinstance(table, Mapping):
        raise ScenarioError(f"{where} must be a table")
    base = Scenario(name, source=source)
    if "extends" in table:
        parent = builtin().get(str(table["extends"]))
        if parent is None:
            raise ScenarioError(f"{where}: extends {table['extends']!r}, not a shipped scenario "
                                f"({', '.join(sorted(builtin()))})")
        base = parent
    if "facts" in table:
        if not isinstance(table["facts"], Mapping):
            raise ScenarioError(f"{where}: facts must be a table")
        base = from_facts(name, {**_facts_of(base), **table["facts"]}, source=source)
    values = dict(base.values)
    dtypes = dict(base.dtypes)
    for key, value in table.items():
        if key in ("extends", "facts", "description"):
            continue
        if key == "dtypes":
            if not isinstance(value, Mapping):
                raise ScenarioError(f"{where}: dtypes must be a table of \"pointer,names\" = [dtypes]")
            for names, dts in value.items():
                dts = dts if isinstance(dts, list) else [dts]
                if not dts or not all(isinstance(d, str) for d in dts):
                    raise ScenarioError(f"{where}: dtypes.{names} must be a dtype name or a list of them")
                dtypes[names] = tuple(dts)
            continue
        if not isinstance(value, (int, float, bool, str)):
            raise ScenarioError(f"{where}: {key} must be a number, a boolean or a string")
        if not _IDENT.match(key):
            try:
                node = ast.parse(key, mode="eval").body
            except SyntaxError:
                node = None
            norm = expression_key(node) if node is not None else None
            if norm is None:
                raise ScenarioError(f"{where}: {key!r} is neither a parameter name nor a shape expression "
                                    "(`tensor.shape[i]`, `tensor.size(i)`)")
            key = norm
        values[key] = value
    return Scenario(name, values, dtypes, str(table.get("description", base.description)), source, dict(base.dims),
                    dict(base.facts), base.role, base.quant, batch=base.batch)


def _facts_of(s: Scenario) -> dict:
    data = json.loads(DATA.read_text(encoding="utf-8"))["scenarios"]
    entry = data.get(s.name)
    return dict(entry["facts"]) if entry else {}


def resolve(names, tables: Mapping[str, Any] | None = None, extra: Mapping[str, Scenario] | None = None,
            source: str = "pyproject.toml") -> list[Scenario]:
    """The scenarios ``names`` (a project's tables first, then ``extra``, then the shipped ones);
    ``"all"`` is every shipped scenario."""
    tables = tables or {}
    out: list[Scenario] = []
    for name in names:
        if name == "all":
            out.extend(s for s in builtin().values() if s.name not in {x.name for x in out})
            continue
        if name in tables:
            out.append(from_table(name, tables[name], source))
        elif extra and name in extra:
            out.append(extra[name])
        elif name in builtin():
            out.append(builtin()[name])
        else:
            known = sorted(set(builtin()) | set(tables) | set(extra or {}))
            raise ScenarioError(f"unknown scenario {name!r}; choose from {', '.join(known)}, all, or a model's "
                                "config.json")
    return out
