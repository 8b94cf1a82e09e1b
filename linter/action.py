"""The GitHub Action's step (``action.yml`` runs ``python -m tilefit.action``).

The composite action maps each input to an environment variable (``INPUT_MODE``, ``INPUT_PATHS``,
``INPUT_TARGETS``, ``INPUT_UNSAFE_FIXES``, ``INPUT_EXTRA_ARGS``, ``INPUT_FAIL_ON_FINDINGS``,
``INPUT_OUTPUT_DIR``); this module does the rest, so the YAML holds no logic:

``check``
    ``tilefit check`` in the ``github`` format (workflow annotations on stdout), then in the
    ``sarif`` format into ``<output-dir>/tilefit.sarif`` (for github/codeql-action/upload-sarif);
    a Markdown summary of the SARIF results goes to ``<output-dir>/report.md`` and the job
    summary. Exit 1 when diagnostics remain (``fail-on-findings: false``: 0).
``fix``
    The fixes of ``tilefit pr`` written into the work tree, not committed, for a later step
    (e.g. peter-evans/create-pull-request with this step's ``branch``, ``title``,
    ``commit-message`` and ``report`` outputs). Annotations and SARIF for what remains.
``pr``
    ``tilefit pr``: the fixes committed on branch ``tilefit/fix-<findings hash>`` (nothing is
    pushed); then ``git push`` and ``gh pr create`` in a later step.

With ``cache: true`` (the default) the check mode's runs keep their result cache in the folder
action.yml restores before the step and saves after it (``$TILEFIT_ACTION_CACHE_DIR``, with
actions/cache), unless the workflow sets ``TILEFIT_CACHE_DIR`` itself; before it is saved, the
records of the run keys this step did not use are removed (:func:`prune_results`), so the saved
folder holds one configuration's records, not every release's and option set's.

Outputs (``$GITHUB_OUTPUT``): ``changed`` (true/false), ``report`` (the Markdown body's path),
``sarif`` (path), ``findings`` (diagnostics left), ``branch``, ``title``, ``commit-message``,
``commit``. Outside a workflow (no ``GITHUB_OUTPUT``) they are printed as ``name=value`` lines.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, TextIO

from tilefit.words import plural

MODES = ("check", "fix", "pr")
# the environment variables action.yml sets, one per input (INPUT_<NAME>)
ENV_INPUTS = ("MODE", "PATHS", "TARGETS", "UNSAFE_FIXES", "EXTRA_ARGS", "FAIL_ON_FINDINGS", "OUTPUT_DIR", "CACHE")
# the folder action.yml's actions/cache steps restore and save (the cache input)
CACHE_DIR_ENV = "TILEFIT_ACTION_CACHE_DIR"
# a record touched less than this before the step started counts as this step's (file times come
# from a coarser clock than time.time())
CLOCK_SLACK_S = 1.0
SUMMARY_ROWS = 50  # findings listed in the check summary


class ActionError(Exception):
    """A bad input: exit code 2 with the message."""


@dataclass
class Inputs:
    mode: str = "check"
    paths: list[str] = field(default_factory=lambda: ["."])
    targets: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    extra_args: list[str] = field(default_factory=list)
    fail_on_findings: bool = True
    output_dir: str = ""
    cache: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Inputs":
        def get(name: str, default: str = "") -> str:
            assert name in ENV_INPUTS, name
            return (env.get(f"INPUT_{name}") or default).strip()

        mode = get("MODE", "check").lower()
        if mode not in MODES:
            raise ActionError(f"input mode: {mode!r} is not one of {', '.join(MODES)}")
        try:
            paths = [p for line in get("PATHS", ".").splitlines() for p in shlex.split(line)] or ["."]
            extra = shlex.split(get("EXTRA_ARGS"))
        except ValueError as exc:
            raise ActionError(f"input paths or extra-args: {exc}") from None
        targets = [t for t in get("TARGETS").replace(",", " ").split() if t]
        output_dir = get("OUTPUT_DIR") or os.path.join(env.get("RUNNER_TEMP") or tempfile.gettempdir(), "tilefit")
        return cls(mode=mode, paths=paths, targets=targets, unsafe_fixes=_bool(get("UNSAFE_FIXES", "false"), "unsafe-fixes"),
                   extra_args=extra, fail_on_findings=_bool(get("FAIL_ON_FINDINGS", "true"), "fail-on-findings"),
                   output_dir=output_dir, cache=_bool(get("CACHE", "true"), "cache"))

    def argv(self) -> list[str]:
        """The command line shared by the modes: paths, targets, fix safety, extra arguments."""
        args = list(self.paths)
        for t in self.targets:
            args += ["--target", t]
        if self.unsafe_fixes:
            args.append("--unsafe-fixes")
        return args + list(self.extra_args)


def _bool(value: str, name: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes", "1", "on"):
        return True
    if v in ("false", "no", "0", "off", ""):
        return False
    raise ActionError(f"input {name}: {value!r} is not true or false")


@dataclass
class Result:
    exit_code: int
    outputs: dict[str, str]
    summary: str  # the Markdown appended to the job summary


def run(inputs: Inputs, env: Mapping[str, str] | None = None, stdout: TextIO | None = None,
        stderr: TextIO | None = None) -> Result:
    """Run one mode; write annotations to ``stdout``, the files under ``inputs.output_dir``."""
    env = dict(os.environ if env is None else env)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    out_dir = Path(inputs.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    report, sarif = out_dir / "report.md", out_dir / "tilefit.sarif"
    if inputs.mode == "check":
        kept = kept_cache(inputs, env)
        started = time.time()
        if kept is not None:
            env["TILEFIT_CACHE_DIR"] = str(kept)
        result = _check(inputs, env, stdout, stderr, report, sarif)
        if kept is not None:
            prune_results(kept, started - CLOCK_SLACK_S)
        return result
    # (a run that applies fixes reads and writes no result cache)
    return _fix(inputs, env, stdout, stderr, report, sarif, commit=inputs.mode == "pr")


def kept_cache(inputs: Inputs, env: Mapping[str, str]) -> Path | None:
    """The folder the check's result cache is kept in between workflow runs: action.yml's
    (``$TILEFIT_ACTION_CACHE_DIR``) with the ``cache`` input on; None when it is off, outside
    action.yml, or when the workflow names a cache folder of its own (``TILEFIT_CACHE_DIR``,
    which this step then neither moves nor prunes)."""
    folder = env.get(CACHE_DIR_ENV)
    if not inputs.cache or not folder or "TILEFIT_CACHE_DIR" in env:
        return None
    return Path(folder)


def prune_results(root: Path, before: float) -> list[str]:
    """Remove from the result cache under ``root`` every run key's records (``results/<key>.*``
    and ``results-digests/<key>.sha256``) of which no file was written or touched since
    ``before``: a run key is a configuration (tilefit's release, the rules, targets, options), so
    those are records of configurations this step did not run, which the saved folder would
    otherwise carry along for ever. Returns the keys removed; a file that cannot be read or
    removed is left as it is (an unprunable cache only costs space)."""
    results = root / "results"
    try:
        names = os.listdir(results)
    except OSError:
        return []
    newest: dict[str, float] = {}
    for name in names:
        key = name.split(".", 1)[0]
        try:
            mtime = os.stat(results / name).st_mtime
        except OSError:
            mtime = float("inf")  # not ours to judge
        newest[key] = max(newest.get(key, mtime), mtime)
    stale = sorted(k for k, t in newest.items() if t < before)
    gone = set(stale)
    for name in names:
        if name.split(".", 1)[0] in gone:
            _remove(results / name)
    for key in stale:
        _remove(root / "results-digests" / f"{key}.sha256")
    return stale


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# -- check -----------------------------------------------------------------------------------
def _check(inputs: Inputs, env, stdout, stderr, report: Path, sarif: Path) -> Result:
    base = [sys.executable, "-m", "tilefit", "check", *inputs.argv()]
    annotate = subprocess.run(base + ["--output-format", "github"], capture_output=True, text=True, env=env)
    stdout.write(rebase_annotations(annotate.stdout, env))
    stderr.write(annotate.stderr)
    code = annotate.returncode
    as_sarif = subprocess.run(base + ["--output-format", "sarif", "-o", str(sarif), "--exit-zero"],
                              capture_output=True, text=True, env=env)
    if as_sarif.returncode not in (0, 1) and code != 2:
        stderr.write(as_sarif.stderr)
        code = 2
    doc = _read_sarif(sarif)
    summary = check_summary(doc, inputs, code)
    report.write_text(summary, encoding="utf-8")
    results = doc["runs"][0]["results"] if doc else []
    findings = sum(1 for r in results if r.get("level") in ("error", "warning"))
    if code == 1 and not inputs.fail_on_findings:
        code = 0
    outputs = {"changed": "false", "report": str(report), "sarif": str(sarif) if doc else "",
               "findings": str(findings), "branch": "", "title": "", "commit-message": "", "commit": ""}
    return Result(code, outputs, summary)


def _read_sarif(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_summary(doc, inputs: Inputs, code: int) -> str:
    """Markdown for the job summary: counts per rule, then the first findings."""
    lines = []
    if doc is None:
        lines.append("## tilefit check: could not run")
        lines.append("")
        lines.append("`tilefit check` ended with exit code 2 (the step's log has the error).")
        return "\n".join(lines) + "\n"
    run_ = doc["runs"][0]
    rules = {r["id"]: r for r in run_["tool"]["driver"].get("rules", [])}
    results = run_["results"]
    shown = [r for r in results if r.get("level") in ("error", "warning")]
    files = {_uri(r) for r in shown}
    if not shown:
        lines.append("## tilefit check: all checks passed")
    else:
        lines.append(f"## tilefit check: {plural(len(shown), 'finding')} in {plural(len(files), 'file')}")
    lines.append("")
    targets = ", ".join(inputs.targets) or "each table's own device (and `[tool.tilefit] targets`)"
    lines.append(f"Paths: {', '.join(f'`{p}`' for p in inputs.paths)}; targets: {targets}.")
    lines.append("")
    if shown:
        counts: dict[str, int] = {}
        for r in shown:
            counts[r["ruleId"]] = counts.get(r["ruleId"], 0) + 1
        lines.append("| rule | name | count |")
        lines.append("|---|---|--:|")
        for rule_id, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| {rule_id} | {rules.get(rule_id, {}).get('name', '')} | {n} |")
        lines.append("")
        lines.append("| file | line | rule | message |")
        lines.append("|---|--:|---|---|")
        for r in shown[:SUMMARY_ROWS]:
            region = r["locations"][0]["physicalLocation"].get("region", {}) if r.get("locations") else {}
            message = r["message"]["text"].replace("|", "\\|")
            lines.append(f"| `{_uri(r)}` | {region.get('startLine', '')} | {r['ruleId']} | {message} |")
        if len(shown) > SUMMARY_ROWS:
            lines.append(f"| … | | | {len(shown) - SUMMARY_ROWS} more in the SARIF file |")
        lines.append("")
        from tilefit.rules import fixable_codes

        fixable = fixable_codes()
        if any(r["ruleId"] in fixable for r in shown):
            lines.append("`tilefit check --fix` (or this action with `mode: fix`) replaces offending entries "
                         "with the fastest config that fits.")
            lines.append("")
    return "\n".join(lines) + "\n"


def _uri(result) -> str:
    """A result's path as people read it (SARIF URIs are percent-encoded)."""
    from urllib.parse import unquote

    try:
        return unquote(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
    except (KeyError, IndexError):
        return ""


# -- fix / pr --------------------------------------------------------------------------------
def _fix(inputs: Inputs, env, stdout, stderr, report: Path, sarif: Path, commit: bool) -> Result:
    import click

    from tilefit import __version__
    from tilefit.api import UsageError
    from tilefit.commands.pr import describe, pr, run_from_params
    from tilefit.pullrequest import PrRefused
    from tilefit.reporters import RenderContext, get_reporter

    argv = inputs.argv()
    try:
        ctx = pr.make_context("pr", list(argv))
    except click.ClickException as exc:
        raise ActionError(f"tilefit pr {shlex.join(argv)}: {exc.format_message()}") from None
    try:
        out = run_from_params(ctx.params, commit=commit, argv=argv)
    except (PrRefused, UsageError) as exc:
        raise ActionError(str(exc)) from None
    except SystemExit:  # a configuration error, already printed on stderr
        raise ActionError(f"tilefit pr {shlex.join(argv)}: bad options or configuration (see the log)") from None
    left = [d for d in out.fix.check.diagnostics if d.severity.value != "info"]
    annotations = io.StringIO()
    root = str(out.fix.check.root) if out.fix.check.root is not None else None
    render = RenderContext(tool_version=__version__, root=root)
    get_reporter("github").render(out.fix.check.diagnostics, annotations, render)
    stdout.write(rebase_annotations(annotations.getvalue(), env))
    with open(sarif, "w", encoding="utf-8") as fh:
        get_reporter("sarif").render(out.fix.check.diagnostics, fh, render)
    report.write_text(out.body, encoding="utf-8")
    stderr.write(describe(out, str(report)) + "\n")
    outputs = {"changed": "true" if out.changed else "false", "report": str(report), "sarif": str(sarif),
               "findings": str(len(left)), "branch": out.branch or "", "title": out.title,
               "commit-message": out.message if out.changed else "", "commit": out.commit or ""}
    return Result(0, outputs, out.body)


_FILE_PROP = re.compile(r"(?<=[ ,])file=([^,:]*)")


def rebase_annotations(text: str, env: Mapping[str, str]) -> str:
    """GitHub places an annotation by a path relative to the repository root; tilefit prints
    paths relative to where it runs (``working-directory``). Prefix them with that folder."""
    workspace = env.get("GITHUB_WORKSPACE")
    if not workspace:
        return text
    prefix = os.path.relpath(os.path.realpath(os.getcwd()), os.path.realpath(workspace))
    if prefix == "." or prefix.startswith(".."):
        return text
    prefix = prefix.replace(os.sep, "/").replace("%", "%25").replace(",", "%2C").replace(":", "%3A")

    def sub(m: re.Match) -> str:
        path = m.group(1)
        return m.group(0) if path.startswith("/") else f"file={prefix}/{path}"

    return "\n".join(_FILE_PROP.sub(sub, line, count=1) if line.startswith("::") else line
                     for line in text.split("\n"))


# -- GitHub's files --------------------------------------------------------------------------
def write_outputs(outputs: Mapping[str, str], path: str | None, stream: TextIO) -> None:
    """``name=value`` lines; multi-line values in GitHub's ``name<<DELIMITER`` form."""
    lines = []
    for name, value in outputs.items():
        if "\n" in value or "\r" in value:
            delim = f"ghadelimiter_{uuid.uuid4().hex}"
            lines.append(f"{name}<<{delim}\n{value.rstrip(chr(10))}\n{delim}\n")
        else:
            lines.append(f"{name}={value}\n")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.writelines(lines)
    else:
        stream.writelines(lines)


def main(env: Mapping[str, str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    env = dict(os.environ if env is None else env)
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        inputs = Inputs.from_env(env)
        result = run(inputs, env, stdout, stderr)
    except ActionError as exc:
        stdout.write(f"::error title=tilefit::{_escape(str(exc))}\n")
        stderr.write(f"error: {exc}\n")
        return 2
    write_outputs(result.outputs, env.get("GITHUB_OUTPUT"), stdout)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(result.summary + "\n")
    return result.exit_code


def _escape(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


if __name__ == "__main__":
    sys.exit(main())
