"""THR001: more threads per block than the target allows."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.variants import effective_launch

from .base import Example, Finding, FixAvailability, Planner, Rule, Scope, TargetContext


class THR001(Rule):
    """Threads per block exceed the target's limit.

    ## What it does
    ``num_warps`` times the warp size (32 on NVIDIA, 64 on AMD CDNA) is the block's thread
    count; reports entries above the device's maximum threads per block (1024).

    ## Why is this bad?
    The launch fails with ``too many resources requested for launch`` / an invalid argument.
    ``num_warps: 32`` runs on NVIDIA (1024 threads) but asks 2048 threads of an MI300X.

    ## Fix
    ``--fix`` replaces the entry with the fastest config (by the performance model) that fits
    every target's threads and shared memory, as for SMEM001.
    """

    code = "THR001"
    name = "threads-per-block"
    severity = Severity.ERROR
    scope = Scope.TARGET
    fix_availability = FixAvailability.SOMETIMES
    fix_planner = Planner.ENTRY
    examples = (
        Example("E=8,N=14336,device_name=AMD_Instinct_MI300X.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_warps": 32}}', True,
                fixed='{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                      '"num_warps": 4}}'),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_warps": 32}}', False),
    )

    reads_variants = False  # see Rule.reads_variants
    reads_launch_group = False  # see Rule.reads_launch_group

    def device_facts(self, device) -> tuple:
        return (device.vendor, device.warp_size, device.max_threads_per_block)  # what check reads of the device

    def check(self, ctx: TargetContext):
        entry = ctx.entry
        if not isinstance(entry, dict):
            return
        dev = ctx.device
        warps, _ = effective_launch(entry, dev.vendor)
        if type(warps) is not int or dev.warp_size is None or dev.max_threads_per_block is None:
            return
        threads = warps * dev.warp_size
        if threads > dev.max_threads_per_block:
            yield Finding(f"{threads} threads per block ({warps} warps of {dev.warp_size}) exceed the limit of "
                          f"{dev.max_threads_per_block} on {ctx.target_names()}",
                          at=("num_warps",) if "num_warps" in entry else (),
                          data={"threads": threads, "limit": dev.max_threads_per_block})
