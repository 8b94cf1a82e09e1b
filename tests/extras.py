"""What a test that needs an optional package says when it is missing: which extra brings it."""

from __future__ import annotations

import pytest

GPU_TEST = "pip install -e '.[gpu-test]'"


def torch_or_skip():
    """``torch``, or a skip that names the extra with it (the ``test`` extra has no torch)."""
    return pytest.importorskip("torch", reason=f"torch is in the gpu-test extra: {GPU_TEST}")
