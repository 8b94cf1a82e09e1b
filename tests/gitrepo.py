"""Temporary git repositories of real corpus tables, for the tests of ``tilefit pr`` and the
GitHub Action (with the ``git_env`` fixture of conftest.py: no global or system git
configuration, so the developer's own settings, hooks and signing never leak in). Nothing here
talks to a network."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# Real tables (SGLang 0.5.23, vLLM 0.33.0) that overflow an RTX 4090, and one that fits it.
VLLM_H200 = "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=128,N=768,device_name=NVIDIA_H200.json"
SGLANG_B200 = ("sglang-0.5.23/sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_3_1/"
               "E=257,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json")
VLLM_4090 = "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=64,N=640,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"

# where each lands in the test repository
LAYOUT = {
    VLLM_H200: "configs/vllm/E=128,N=768,device_name=NVIDIA_H200.json",
    SGLANG_B200: "configs/sglang/triton_3_3_1/E=257,N=256,device_name=NVIDIA_B200,dtype=fp8_w8a8,block_shape=[128, 128].json",
    VLLM_4090: "configs/vllm/E=64,N=640,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json",
}
OVERFLOWING = (LAYOUT[VLLM_H200], LAYOUT[SGLANG_B200])
FITTING = LAYOUT[VLLM_4090]


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout.strip()


def make_repo(root: Path, corpus: Path, tables=tuple(LAYOUT)) -> Path:
    """A repository on branch ``main`` with the given corpus tables, a README, one commit."""
    root.mkdir(parents=True)
    for src in tables:
        dest = root / LAYOUT[src]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / src, dest)
    (root / "README.md").write_text("configs\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test Maintainer")
    git(root, "config", "user.email", "maintainer@example.invalid")
    git(root, "config", "commit.gpgsign", "false")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "tables")
    return root


def fix_branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--list", "--format=%(refname:short)", "tilefit/*").split()
