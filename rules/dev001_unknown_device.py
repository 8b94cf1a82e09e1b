"""DEV001: the file names a device the device database does not know."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope, TableFamilies


class DEV001(Rule):
    """File name names an unknown device.

    ## What it does
    Reports a ``device_name=`` (``device=`` for LoRA tables) that resolves to no device of the
    database, including the empty name some ROCm machines produce.

    ## Why is this bad?
    By default tilefit checks a table against the device its name names; with an unknown
    device nothing is checked unless ``--target`` is given. Add the device with
    ``extend-device-db`` (a JSON file per device, see ``tilefit devices``) or pass targets.
    """

    code = "DEV001"
    name = "unknown-device"
    severity = Severity.WARNING
    scope = Scope.FILE
    families = TableFamilies(extra=("mamba_ssu", "lora_csgmv", "lora_moe_base_gemm", "sp_collective", "moe_front",
                                    "helion"))
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_Imaginary_X1.json", "{}", True),
        Example("E=8,N=14336,device_name=.json", "{}", True),
        Example("E=8,N=14336,device_name=NVIDIA_GeForce_RTX_4090.json", "{}", False),
    )

    def check(self, ctx: FileContext):
        name = ctx.meta.device_name
        if name is None or ctx.named_device is not None:
            return
        if name == "":
            yield Finding("empty device name: no target to check against (torch reported no device name); "
                          "pass --target", identity="")
            return
        yield Finding(f"unknown device {name!r}: not in the device database, so this file is not checked "
                      "against it; add it with extend-device-db or pass --target", identity=name)
