"""``tilefit doctor``: will this model crash on this GPU with this engine -- and make it not crash."""

from __future__ import annotations

import sys

import click

from tilefit.dtypes import KV_CACHE_NAMES
from tilefit.estimate import MODES

from .common import check_output, check_triton_version, emit, fail

FORMATS = ("text", "json", "html")
ENGINES = ("sglang", "vllm", "all")


def _batch_sizes(text: str | None, usual: list[int]) -> list[int] | None:
    if not text:
        return None
    if text.strip() in ("usual", "engine"):
        return list(usual)
    out: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise click.BadParameter(f"{part!r} is not a number or a range A-B", param_hint="--batch-sizes") from None
        if a < 1 or b < a or b > 1 << 20:
            raise click.BadParameter(f"{part!r} is not a range of positive batch sizes", param_hint="--batch-sizes")
        out.update(range(a, b + 1))
    return sorted(out)


@click.command()
@click.argument("model", required=False, type=click.Path())
@click.option("--shape", default=None, metavar="E=..,N=..,K=..,topk=..",
              help="The model's sizes instead of (or on top of) a config.json: E experts, N expert intermediate "
                   "size, K hidden size, topk; also shared=, kv_lora_rank=, qk_rope_head_dim=, heads=. "
                   "--tp-size/--ep-size still divide them.")
@click.option("--dtype", default=None, metavar="DTYPE",
              help="Quantisation instead of the config's: fp8_w8a8[:per_channel|:block=128x128], int8_w8a8, "
                   "int4_w4a16[:group=128], int8_w8a16, bf16, fp16.")
@click.option("--engine", "engines", multiple=True, type=click.Choice(ENGINES),
              help="Engine(s) to judge. [default: both]")
@click.option("--engine-version", default=None, metavar="VERSION",
              help="Engine release profile (0.5.23, 0.5.12 / old for SGLang's earlier fp8 default, 0.33.0); "
                   "needs a single --engine. [default: the newest profile]")
@click.option("--engine-path", default=None, type=click.Path(exists=True, file_okay=False),
              help="The installed engine (site-packages, or the package folder) to search for tables instead "
                   "of the bundled index of shipped files.")
@click.option("--allow-import", is_flag=True,
              help="Import the installed engine and ask its own get_default_config/get_config_file_name.")
@click.option("--target", "-t", "targets", multiple=True, metavar="DEVICE",
              help="Device key or alias (rtx4090), architecture (sm_120), group (consumer) or file-name device. "
                   "Repeatable.")
@click.option("--device", "device", type=click.Choice(["local"]), default=None,
              help="Judge the GPU torch sees (device 0).")
@click.option("--device-file", "device_files", multiple=True, type=click.Path(dir_okay=False),
              help="Extra device database file (JSON). Repeatable.")
@click.option("--tp-size", default=1, show_default=True, type=click.IntRange(min=1), help="Tensor-parallel size.")
@click.option("--ep-size", default=1, show_default=True, type=click.IntRange(min=1),
              help="Expert-parallel size (MoE TP becomes tp/ep).")
@click.option("--kv-cache-dtype", default=None,
              type=click.Choice(KV_CACHE_NAMES),
              help="KV-cache dtype the server is started with (MLA decode). [default: the checkpoint's, else the model dtype]")
@click.option("--triton-version", default=None, metavar="X.Y.Z",
              help="Triton the engine runs with (SGLang's triton_X_Y_Z folder, the model tables). "
                   "[default: the installed one, else the profile's assumption]")
@click.option("--batch-sizes", default=None, metavar="LIST",
              help="Batch sizes (tokens per call) to judge: '1,2,4', ranges '1-4096', or 'usual' (the tuners' "
                   "18 sizes). [default: every size 1-4096]")
@click.option("--shared-expert-fusion", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="SGLang's fusion of the shared expert into the MoE kernel (E + 1).")
@click.option("--force-triton", is_flag=True,
              help="Judge the Triton kernels even where the engine would run another backend (Marlin, FlashMLA...).")
@click.option("--estimator", type=click.Choice(MODES), default="auto", show_default=True,
              help="analytic closed forms, exact compiles (needs Triton), or auto (analytic, exact near a limit "
                   "and where no closed form exists).")
@click.option("--write", "write_dir", default=None, type=click.Path(file_okay=False),
              help="Write fitting tables under the names the engine looks up, into DIR (SGLang: "
                   "DIR/configs/triton_X_Y_Z/; vLLM: DIR/), and print the export line.")
@click.option("--output-format", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text, json, or html: one self-contained page (kernels x targets, a page per kernel).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to a file instead of stdout.")
def doctor(model, shape, dtype, engines, engine_version, engine_path, allow_import, targets, device, device_files,
           tp_size, ep_size, kv_cache_dtype, triton_version, batch_sizes, shared_expert_fusion, force_triton,
           estimator, write_dir, output_format, output_file):
    """Will MODEL crash on this GPU with this engine? And make it not crash.

    MODEL is a local model folder or its config.json (never downloaded). For every engine and
    target, doctor builds the tuning-table name the engine will look for, searches the folders
    the engine searches, and judges the config every batch size gets (the table's nearest entry,
    or the engine's default config) for each Triton kernel the model runs: the fused-MoE GEMMs,
    the block-fp8 dense GEMMs and MLA decode.

    \b
    Exit codes: 0 nothing overflows, 1 a kernel overflows shared memory (or the engine fails
    before launching it, or a written file fails its checks), 2 usage error (bad options,
    missing or unreadable config) or a --write folder that cannot be written.

    \b
    tilefit doctor ./Qwen3-30B-A3B-FP8 --target rtx4090 --engine sglang --engine-version old
    tilefit doctor ./DeepSeek-V2-Lite-Chat --target rtx5090 --kv-cache-dtype fp8 --engine vllm
    tilefit doctor --shape E=128,N=768,K=2048,topk=8 --dtype fp8_w8a8 -t 4090 --write ./moe-configs
    """
    check_triton_version(triton_version)
    check_output(output_file)
    if write_dir is not None:
        from .common import creatable_folder_problem

        problem = creatable_folder_problem(write_dir)
        if problem is not None:
            fail(f"--write {write_dir}: cannot create or write the folder: {problem}")
    from tilefit.api import UsageError, load_devices
    from tilefit.config import Settings
    from tilefit.doctor import run as run_mod
    from tilefit.doctor.kernels import ShapeError
    from tilefit.doctor.model import ModelConfigError
    from tilefit.serving.profiles import ProfileError

    request = run_mod.Request(
        model=model, shape=shape, dtype=dtype, engines=list(engines), engine_version=engine_version,
        engine_path=engine_path, allow_import=allow_import, targets=list(targets), local=device == "local",
        device_files=list(device_files), tp=tp_size, ep=ep_size, kv_cache_dtype=kv_cache_dtype,
        triton_version=triton_version, batch_sizes=None, shared_expert_fusion=shared_expert_fusion,
        force_triton=force_triton, estimator=estimator, write_dir=write_dir,
    )
    try:
        request.batch_sizes = _batch_sizes(batch_sizes, run_mod.usual_batch_sizes())
        report = run_mod.run(request, load_devices(Settings(), request.device_files))
    except (UsageError, ModelConfigError, ShapeError, ProfileError) as exc:
        fail(str(exc))
        return
    except click.BadParameter:
        raise
    from tilefit.doctor.report import render_json, render_text

    if output_format == "html":
        from tilefit import __version__
        from tilefit.audit.doctor import build_doctor_audit
        from tilefit.reporters.html import render_page

        from .check import command_line

        audit = build_doctor_audit(report, command=command_line(), tool_version=__version__)
        text = render_page(audit.to_json(), audit.title, generator=audit.meta["tool"])
    else:
        text = render_json(report) if output_format == "json" else render_text(report)
    emit(text, output_file)
    sys.exit(report.exit_code)
