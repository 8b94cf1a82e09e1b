"""EST001's hint names what would give the exact figure for the cause at hand (issue 17 item 3):
with Triton installed, an engine's table is judged with the engine's own kernel, so "install
Triton" would not help -- its source (--engine-kernels) or its calibration would."""

from __future__ import annotations

from rules.est001_no_estimate import exact_hint
from tilefit import versions
from tilefit.smem import engine_calibrate as ec


class _Estimator:
    def __init__(self, available: bool, mode: str = "auto"):
        self._available, self.mode = available, mode

    def exact_available(self) -> bool:
        return self._available


def _spec(engine=None, triton=None):
    spec = ec.Point(ec.Path("fused_moe", "bf16", tma="b"), (16, 64, 128), 4, 6, "sm_89").spec()
    return spec.with_(engine=engine, triton=triton) if engine else spec


def test_without_triton_the_hint_is_to_install_it():
    assert "install Triton" in exact_hint(_Estimator(False), _spec("sglang"))
    assert "install Triton" in exact_hint(object(), _spec())


def test_with_triton_an_engine_table_asks_for_the_engine_s_kernel_not_for_triton(monkeypatch):
    monkeypatch.setattr(versions, "installed_triton", lambda: "3.9.0")
    hint = exact_hint(_Estimator(True), _spec("sglang"))
    assert "install Triton" not in hint
    assert "--engine-kernels <tree>" in hint and "tilefit calibrate smem --engine sglang==0.5.23" in hint


def test_a_table_of_another_triton_release_asks_for_that_release_s_calibration(monkeypatch):
    monkeypatch.setattr(versions, "installed_triton", lambda: "3.9.0")
    hint = exact_hint(_Estimator(True), _spec("sglang", "3.4"))
    assert "Triton 3.4" in hint and "Triton 3.9 is installed" in hint and "--triton-python" in hint


def test_the_analytic_estimator_is_told_to_compile():
    assert "--estimator auto or exact" in exact_hint(_Estimator(True, "analytic"), _spec("sglang"))


def test_a_release_that_cannot_build_the_kernel_there_names_the_release_judged_instead(monkeypatch):
    """SGLang 0.5.23's fused MoE does not build under Triton 3.1 on sm_90 and newer (no gdc_wait):
    its triton_3_1_0 tables are judged with the nearest release that builds it, and that is the
    release to calibrate, not 3.1."""
    monkeypatch.setattr(versions, "installed_triton", lambda: "3.9.0")
    spec = ec.Point(ec.Path("fused_moe", "bf16"), (256, 64, 128), 8, 3, "sm_110").spec().with_(engine="sglang",
                                                                                               triton="3.1")
    hint = exact_hint(_Estimator(True), spec, "sm_110")
    assert "Triton 3.1 cannot build sglang's kernel on sm_110" in hint and "gdc_wait" in hint
    assert "<a venv with Triton 3.5>" in hint and "<a venv with Triton 3.1>" not in hint
    # where 3.1 would build it (before sm_90) the table's own release is what to calibrate
    assert "<a venv with Triton 3.1>" in exact_hint(_Estimator(True), spec, "sm_89")


def test_an_arch_the_release_s_probe_record_has_already_is_not_sent_to_probe_it_again(monkeypatch):
    """SGLang's Triton 3.5 probe record has probed sm_110 and kept it apart (its bytes differ from
    3.9's): ``--probe-from 3.9 --extend --no-fresh --arch sm_110`` is refused there ("probed
    already"), so the hint names the fresh calibration of that release instead, for the kernel."""
    from tilefit.smem.engine_model import kernel_forms
    from tilefit.smem.engine_probe_merge import probed_archs

    assert "sm_110" in probed_archs(kernel_forms("fused_moe", "sglang", "0.5.23", "3.5").doc)
    monkeypatch.setattr(versions, "installed_triton", lambda: "3.9.0")
    spec = ec.Point(ec.Path("fused_moe", "int8_w8a16"), (256, 64, 128), 8, 3, "sm_110").spec().with_(
        engine="sglang", triton="3.5")
    hint = exact_hint(_Estimator(True), spec, "sm_110")
    assert "Triton 3.5's probe record has sm_110 already" in hint and "is refused" in hint, hint
    command = hint.split("calibrate that release afresh (", 1)[1]
    assert command.startswith("tilefit calibrate smem --engine sglang==0.5.23 --kernel fused_moe --probe-from 3.9 "
                              "--triton-python <a venv with Triton 3.5>"), hint
    assert "--extend" not in command and "--no-fresh" not in command and "--arch" not in command
    # a 3.1 table there is judged with 3.5 (3.1 cannot build the kernel on sm_110): the same answer
    assert "Triton 3.5's probe record has sm_110 already" in exact_hint(_Estimator(True), spec.with_(triton="3.1"),
                                                                        "sm_110")


def test_a_release_calibrated_afresh_already_is_not_sent_to_calibrate_again(monkeypatch, engine_package_copy):
    """Once the fresh calibration has run (the record has forms of its own beside its probe), a
    path it proves nothing for on the arch is not sent round the same command again."""
    import json

    folder = engine_package_copy("fused_moe", "sglang", "0.5.23")
    record = folder / "triton-3.5.json"
    doc = json.loads(record.read_text())
    assert not doc.get("formulas")  # the shipped record: a probe only (--no-fresh)
    doc["formulas"] = {"tcgen05": {"int8_w8a8": "0"}}  # what a fresh calibration adds: its own forms
    record.write_text(json.dumps(doc))
    monkeypatch.setattr(versions, "installed_triton", lambda: "3.9.0")
    spec = ec.Point(ec.Path("fused_moe", "int8_w8a16"), (256, 64, 128), 8, 3, "sm_110").spec().with_(
        engine="sglang", triton="3.5")
    hint = exact_hint(_Estimator(True), spec, "sm_110")
    assert "calibration (probed from Triton 3.9, with forms of its own" in hint and "proves no form" in hint, hint
    assert "tilefit calibrate smem" not in hint
