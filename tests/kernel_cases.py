"""The numerical checks shared by the reference-kernel test modules.

Each module names its kernel and two case tables: ``cases`` run on the CPU under Triton's
interpreter (all in one child process) and on a GPU, ``gpu_only`` only on a GPU. Every case is
checked against its torch reference by :func:`tilefit.kernels.checks.run_case`.

    interpreted, test_interpreted, test_gpu = case_tests("block_gemm", CASES, GPU_ONLY)
"""

from __future__ import annotations

import json

import pytest


def case_tests(kernel: str, cases: dict, gpu_only: dict):
    """(module fixture ``interpreted``, ``test_interpreted``, ``test_gpu``) for ``kernel``."""

    def case(name: str) -> dict:
        return dict(cases[name] if name in cases else gpu_only[name], kernel=kernel)

    @pytest.fixture(scope="module")
    def interpreted():
        from tilefit.kernels.interpret import run_interpreted

        names = list(cases)
        return dict(zip(names, run_interpreted([case(n) for n in names])))

    @pytest.mark.parametrize("name", list(cases))
    def test_interpreted(interpreted, name):
        res = interpreted[name]
        assert res.get("ok"), json.dumps(res, indent=1)

    @pytest.mark.gpu
    @pytest.mark.parametrize("name", list(cases) + list(gpu_only))
    def test_gpu(name):
        import torch

        if not torch.cuda.is_available():
            pytest.skip("no CUDA GPU")
        from tilefit.kernels.checks import run_case

        res = run_case(case(name), "cuda")
        assert res.get("ok"), json.dumps(res, indent=1)

    return interpreted, test_interpreted, test_gpu
