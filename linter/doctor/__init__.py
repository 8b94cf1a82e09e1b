"""`tilefit doctor`: model shape + engine profile + device -> verdict per kernel and batch size.

>>> from tilefit.doctor import Request, diagnose
>>> report = diagnose(Request(model="Qwen3-30B-A3B-FP8/", targets=["rtx4090"], engines=["sglang"],
...                           engine_version="0.5.12"))
>>> report.exit_code, report.overflows

Modules: :mod:`.model` (config.json -> shape), :mod:`.profiles` (engine release profiles as
data), :mod:`.shipped` (bundled index of shipped tables), :mod:`.lookup` (names, folders,
nearest entry), :mod:`.kernels` (which kernels, which sizes), :mod:`.core` (the verdicts),
:mod:`.choose` and :mod:`.write` (``--write``), :mod:`.report` (text and JSON),
:mod:`.engine_import` (``--allow-import``).
"""

from __future__ import annotations


def diagnose(request, db=None):
    """Run the doctor for a :class:`tilefit.doctor.run.Request`; returns a ``DoctorReport``."""
    from tilefit.api import load_devices
    from tilefit.config import Settings

    from .run import run

    return run(request, db if db is not None else load_devices(Settings(), request.device_files))


def __getattr__(name):
    if name == "Request":
        from .run import Request

        return Request
    raise AttributeError(name)
