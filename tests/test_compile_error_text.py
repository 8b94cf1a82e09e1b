"""A launch whose kernel Triton cannot compile is reported with the compiler's words only: no
path of the scratch module tilefit compiled it from (a file under the cache folder, which differs
between machines and CI runs), so the same code reads the same everywhere -- in the text report,
in the kept reports the result cache compares, and in a baseline's messages. The kernel below fails
as vLLM 0.33.0's ``_gather_block_tables_kernel`` does (an int32 loaded and cast to a pointer: MLIR's
``tt.int_to_ptr`` rejects it, and its error names the scratch file and line)."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

OPS = '''import torch
import triton
import triton.language as tl


@triton.jit
def gather_kernel(table_ptrs, out_ptr, BLOCK: tl.constexpr):
    row = tl.load(table_ptrs).to(tl.pointer_type(tl.int32))
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(row + offs))


def gather(table: torch.Tensor, out: torch.Tensor):
    table = table.to(torch.int32)
    gather_kernel[(1,)](table, out, BLOCK=128)
'''


def test_a_compile_error_names_no_scratch_file_and_reads_the_same_from_any_cache(cli, tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    outputs = []
    for cache in ("cache-a", "elsewhere/cache-b"):
        monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / cache))
        result = cli("check", "pkg", "--target", "rtx4090", "--isolated")
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1]
    line = next(ln for ln in outputs[0].splitlines() if "EST002" in ln)
    assert "could not compile gather_kernel for sm_89: error: 'tt.int_to_ptr' op" in line, line
    assert "_tilefit_scratch_" not in outputs[0] and "cache-a" not in outputs[0]
