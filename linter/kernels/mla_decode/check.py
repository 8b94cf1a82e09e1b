"""Numerical checks of the mla_decode reference kernel against its pure-torch reference.

``check(case, device)`` runs one case (a JSON-able dict, see :mod:`tilefit.kernels.checks`);
``GPU_CASES`` are the cases of a GPU run (``python -m tilefit.smem.validate``). torch and triton
are imported inside the functions (the interpreter runner sets ``TRITON_INTERPRET`` first).
"""

from __future__ import annotations

from tilefit.kernels.checks import FP8_MAX, rel_err, torch_dtype, torch_module


def check(case: dict, device: str = "cpu") -> dict:
    torch = torch_module()
    from . import kernel as md

    gen = torch.Generator().manual_seed(case.get("seed", 0))
    seq_lens_list = case.get("seq_lens", [37, 70])
    batch = len(seq_lens_list)
    heads, lk, lv = case.get("heads", 16), case.get("Lk", 576), case.get("Lv", 512)
    page = case.get("page_size", 1)
    splits = case.get("splits", 4)
    q_dtype = torch_dtype(case.get("dtype", "bf16"))
    pages_per_seq = [-(-s // page) for s in seq_lens_list]
    max_pages = max(pages_per_seq)
    n_pages = sum(pages_per_seq) + 3
    perm = torch.randperm(n_pages, generator=gen)
    table = torch.zeros((batch, max_pages), dtype=torch.int32)
    pos = 0
    for b, np_ in enumerate(pages_per_seq):
        table[b, :np_] = perm[pos:pos + np_].to(torch.int32)
        pos += np_
    q = torch.randn((batch, heads, lk), generator=gen).to(q_dtype)
    kv = torch.randn((n_pages * page, 1, lk), generator=gen)
    kv_scale = None
    if case.get("kv_dtype", "bf16") == "fp8":
        kv_scale = (kv.abs().max() / FP8_MAX).reshape(1).float()
        kv = (kv / kv_scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        kv_scale = kv_scale.to(device)
    else:
        kv = kv.to(q_dtype)
    q, kv, table = q.to(device), kv.to(device), table.to(device)
    seq_lens = torch.tensor(seq_lens_list, dtype=torch.int32, device=device)
    sm_scale = 1.0 / lk ** 0.5
    att = md.mla_decode_stage1(q, kv, table, seq_lens, num_kv_splits=splits, sm_scale=sm_scale, page_size=page,
                               lv=lv, k_scale=kv_scale, block_n=case.get("BLOCK_N", 32),
                               block_h=case.get("BLOCK_H", 16), num_stages=case.get("num_stages", 2))
    ref = md.mla_decode_stage1_ref(q, kv, table, seq_lens, num_kv_splits=splits, sm_scale=sm_scale,
                                   page_size=page, lv=lv, k_scale=kv_scale)
    full = md.mla_decode_ref(q, kv, table, seq_lens, sm_scale=sm_scale, page_size=page, lv=lv, k_scale=kv_scale)
    merged = md.mla_decode_stage2_ref(att, seq_lens, lv)
    err = max(rel_err(att[..., :lv], ref[..., :lv]), rel_err(att[..., lv], ref[..., lv]), rel_err(merged, full))
    tol = 3e-2
    return {"err": err, "tol": tol, "ok": err <= tol}


# Cases for a GPU run (``python -m tilefit.smem.validate``).
GPU_CASES: list[dict] = [
    dict(kv_dtype="bf16", heads=128, seq_lens=[1000, 517, 1], splits=8, page_size=64),
    dict(kv_dtype="fp8", heads=16, seq_lens=[777, 64], splits=4, page_size=16),
    dict(kv_dtype="fp8", heads=16, seq_lens=[777, 64], splits=4, page_size=16, num_stages=1),
]
