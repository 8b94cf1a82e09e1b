"""``tilefit doctor --write DIR``: write fitting tables under the names the engine looks up.

For each engine profile and device name the doctor judged, the fused-MoE table is written where
the engine reads it without a code change:

* SGLang: ``DIR/configs/triton_X_Y_Z/<name>`` (X_Y_Z: the Triton version judged; SGLang falls
  back to any other ``triton_*`` folder holding the name, so a mismatch still loads it), used
  with ``export SGLANG_MOE_CONFIG_DIR=DIR`` (which replaces the package folder);
* vLLM: ``DIR/<name>``, used with ``export VLLM_TUNED_CONFIG_FOLDER=DIR``.

The table starts from what the engine uses today (the tuned file's keys and entries, each
with every key the engine reads, SGLang's ``USE_TMA`` included, else the default config at the
engine's usual batch sizes) and every entry that overflows a target is
replaced by :func:`tilefit.doctor.choose.choose_entry`. Block-GEMM tables have no override
folder in either engine; when one overflows it is written to ``DIR/block_gemm/`` with the
package folder it has to be copied to. The written files are then verified twice: the doctor
re-runs its lookup with the override folder set, and ``tilefit check`` judges each file for
its targets.
"""

from __future__ import annotations

import json
import shlex
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from tilefit.atomicfile import write_atomic
from tilefit.serving.profiles import Profile, first_case

from .choose import Constraints, choose_entry, fixer_table
from .core import WRITE_FAILED, Doctor, Section, Written, gemm_specs, moe_specs
from .lookup import triton_folder_name


def _dump(table: dict) -> str:
    return json.dumps(table, indent=4) + "\n"


def triton_dir_for(profile: Profile, triton_version: str | None) -> str:
    for v in (triton_version, profile.assumed_triton_version, "3.8.0"):
        name = triton_folder_name(v) if v else None
        if name:
            return name
    return "triton_3_8_0"


def _constraints(doctor: Doctor, gemm: bool = False) -> Constraints:
    q = doctor.model.quant
    return Constraints(block=q.block, group=q.group_size if not gemm else None)


def _start_moe(doctor: Doctor, section: Section) -> tuple[list[int], dict[int, dict], str]:
    """The entries the written table starts from, each whole: the keys the engine's launcher
    pops (the profile's ``drop_keys``: SGLang's ``USE_TMA``) choose its kernel, and are kept."""
    up = section.kernel("moe_up")
    if up.lookup is not None and up.lookup.table is not None:
        table = up.lookup.table
        out = {k: dict(v) for k, v in table.items() if isinstance(v, dict)}
        return list(out), out, f"the entries of {up.lookup.path}"
    keys = section.profile.batch_sizes
    out = {}
    for m in keys:
        _, cfg = doctor._moe_default(section.profile, section.target, section.moe, m)
        out[m] = dict(cfg)
    return keys, out, f"{section.profile.label}'s default config at its usual batch sizes"


def _repair(doctor: Doctor, entries: dict[int, dict], fits, constraints: Constraints,
            fixer_entries: dict[int, dict] | None) -> tuple[OrderedDict, int, list[str]]:
    table: OrderedDict = OrderedDict()
    changed = 0
    problems = []
    for key, start in entries.items():
        fixed = (fixer_entries or {}).get(key)
        if fixed is not None and fits(fixed):
            cfg, how = dict(fixed), ("kept (fits)" if fixed == dict(start) else "fixer")
        else:
            cfg, how = choose_entry(start, fits, constraints)
        if cfg is None:
            problems.append(f"batch size {key}: no config reachable from {start} fits")
            continue
        if how != "kept (fits)":
            changed += 1
        table[str(key)] = cfg
    return table, changed, problems


def _write(path: Path, text: str) -> str | None:
    """Write ``text`` atomically, its folder created; the reason it could not be, or None."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as exc:
        return f"{WRITE_FAILED}{path}: {exc.strerror or exc}"
    return None


def write_tables(doctor: Doctor, sections: Sequence[Section], out_dir: str | Path,
                 estimator_mode: str = "auto", skipped: list[str] | None = None,
                 device_files: Sequence[str] = ()) -> tuple[list[Written], list[str]]:
    """Write what changes something: a table for an engine and device only when some entry the
    engine uses there overflows (``skipped`` gets one line for each table left unwritten). The
    fixer and the check of each written table read the devices of ``device_files`` too (the
    doctor's ``--device-file``: a target it defines, or a bundled device it replaces)."""
    skipped = skipped if skipped is not None else []
    out_dir = Path(out_dir)
    written: list[Written] = []
    problems: list[str] = []
    groups: dict[tuple, list[Section]] = {}
    for s in sections:
        up = s.kernel("moe_up")
        if up is None or not up.used or s.device_name is None or up.lookup is None or up.lookup.name is None:
            continue
        groups.setdefault((s.profile.name, s.device_name), []).append(s)
    done_paths: set[Path] = set()
    for group in groups.values():
        first = group[0]
        profile = first.profile
        targets = [s.target for s in group]
        name = first.kernel("moe_up").lookup.name
        keys, start, origin = _start_moe(doctor, first)

        drop = set(profile.moe.get("drop_keys", []))

        def fits(cfg, targets=targets, engine=profile.engine, drop=drop):
            # the gate/up GEMM launches the whole entry (USE_TMA: its TMA kernel); the down GEMM,
            # which reuses the entry (no _down table is written), gets it with those keys popped
            launched = [cfg]
            if drop & set(cfg):
                launched.append({k: v for k, v in cfg.items() if k not in drop})
            return doctor.judge.fits_everywhere(
                [spec for t in targets for c in launched for spec in moe_specs(doctor.model, c, t, engine)], targets)

        if profile.engine == "sglang":
            rel = Path("configs") / triton_dir_for(profile, doctor.options.triton_version) / name
            export = f"export SGLANG_MOE_CONFIG_DIR={shlex.quote(str(out_dir.resolve()))}"
        else:
            rel = Path(name)
            export = f"export VLLM_TUNED_CONFIG_FOLDER={shlex.quote(str(out_dir.resolve()))}"
        path = out_dir / rel
        if path in done_paths:
            continue
        done_paths.add(path)
        entries = {k: start[k] for k in keys if k in start}
        if entries and all(isinstance(cfg, dict) and fits(cfg) for cfg in entries.values()):
            skipped.append(f"{profile.label} on {', '.join(t.key for t in targets)}: {name} not written: "
                           f"every entry the engine uses fits already ({origin})")
            continue
        existed = path.exists()
        fixer_entries, fixer_note = fixer_table(path, start, [t.key for t in targets], estimator_mode,
                                              device_files)
        table, changed, missing = _repair(doctor, {k: start[k] for k in keys if k in start}, fits,
                                          _constraints(doctor), fixer_entries)
        if missing:
            problems.extend(f"{path}: {m}" for m in missing)
        if not table:
            continue
        problem = _write(path, _dump(table))
        if problem is not None:
            problems.append(problem)
            continue
        w = Written(profile.engine, ",".join(t.key for t in targets), str(path), name, export,
                    entries=len(table), changed=changed)
        w.notes.append(f"started from {origin}")
        if fixer_note:
            w.notes.append(fixer_note)
        if existed:
            w.notes.append("replaced the file that was there")
        if profile.engine == "sglang":
            w.notes.append("SGLANG_MOE_CONFIG_DIR replaces the package folder: tables the package ships for other "
                           "shapes are not read while it is set")
            if first.kernel("moe_down") and first.kernel("moe_down").down_lookup and first.kernel("moe_down").down_lookup.found:
                w.notes.append("no _down table is written: the down GEMM reuses this table's entries")
        _verify(doctor, group, out_dir, w)
        _check(path, targets, estimator_mode, w, device_files)
        written.append(w)

    # Block GEMM: no override folder exists; write only what overflows, with where to copy it.
    for s in sections:
        for k in s.kernels:
            if k.role != "block_gemm" or not k.overflows or k.lookup is None or k.lookup.name is None:
                continue
            path = out_dir / "block_gemm" / k.lookup.name
            if path in done_paths:
                continue
            done_paths.add(path)
            w = _write_gemm(doctor, s, k, path, estimator_mode, device_files)
            if w is not None:
                written.append(w)
    return written, problems


def _write_gemm(doctor: Doctor, section: Section, k, path: Path, estimator_mode: str,
                device_files: Sequence[str] = ()) -> Written | None:
    profile, target = section.profile, section.target
    if k.lookup.table is not None:
        start = {m: dict(v) for m, v in k.lookup.table.items() if isinstance(v, dict)}
    else:
        start = {}
        for m in profile.batch_sizes:
            env = {"BN_Q": doctor.model.quant.block[0], "BK_Q": doctor.model.quant.block[1],
                   "HIP": int(target.device.vendor == "AMD"), "M": m}
            start[m] = first_case(profile.block_gemm.defaults, env)[1]

    def fits(cfg):
        return doctor.judge.fits_everywhere(gemm_specs(doctor.model, cfg, target, profile.engine), [target])

    table, changed, missing = _repair(doctor, start, fits, _constraints(doctor, gemm=True), None)
    if not table or changed == 0:
        return None
    problem = _write(path, _dump(table))
    if problem is not None:
        w = Written(profile.engine, target.key, str(path), k.lookup.name, None, len(table), changed)
        w.check_exit = 2
        w.check_messages.append(problem)
        return w
    dest = f"<{profile.engine} package>/{profile.block_gemm.package_dir}/"
    w = Written(profile.engine, target.key, str(path), k.lookup.name, None, len(table), changed)
    w.notes.append(f"{profile.engine} reads block-GEMM tables only from its package folder: copy this file to {dest}")
    _check(path, [target], estimator_mode, w, device_files)
    return w


def _verify(doctor: Doctor, group: Sequence[Section], out_dir: Path, w: Written) -> None:
    """Re-run the lookup with the override folder set: every MoE row must now fit."""
    ok = True
    for s in group:
        env_var = s.profile.moe.env
        env = dict(doctor.options.env)
        env[env_var] = str(out_dir)
        again = doctor.section(s.profile, s.target, env=env)
        for k in again.kernels:
            if k.role.startswith("moe") and k.used:
                if k.lookup is None or k.lookup.path is None or not str(k.lookup.path).startswith(str(out_dir)):
                    ok = False
                    w.notes.append(f"verification: {s.profile.label} on {s.target.key} does not load the written file")
                elif k.overflows:
                    ok = False
                    w.notes.append(f"verification: {k.label} still overflows on {s.target.key}")
    w.verified = ok


def _check(path: Path, targets, estimator_mode: str, w: Written, device_files: Sequence[str] = ()) -> None:
    """``tilefit check`` on the written file, for its targets."""
    from tilefit.api import CheckOptions, UsageError, run_check
    from tilefit.config import Settings

    try:
        result = run_check([str(path)], CheckOptions(targets=[t.key for t in targets], estimator=estimator_mode,
                                                     device_files=list(device_files)), Settings())
    except UsageError as exc:
        w.check_exit = 2
        w.check_messages.append(str(exc))
        return
    w.check_exit = result.exit_code
    w.check_messages = [f"{d.code} {d.message}" for d in result.diagnostics] + list(result.errors)
