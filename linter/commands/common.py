"""Helpers shared by commands: config loading with clean errors, the usage-error exit, and where a report goes."""

from __future__ import annotations

import sys

import click

from tilefit.config import ConfigError, Settings, load_settings
from tilefit.words import plural  # noqa: F401  (the commands' import of it)


def fail(message: str, code: int = 2) -> None:
    from tilefit.reporters.common import printable

    click.echo(printable(f"error: {message}"), err=True)
    sys.exit(code)


def emit(text: str, output_file: str | None) -> None:
    """A command's report: written to ``output_file`` (atomically, its folder created as ruff does
    for ``-o``; one line and exit 2 when it cannot be), else printed."""
    if output_file:
        import os

        from tilefit.reporters.html import write_page

        problem = output_problem(output_file)
        if problem is None:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(output_file)), exist_ok=True)
                write_page(output_file, text)
                return
            except OSError as exc:
                problem = exc.strerror or str(exc)
        fail(f"cannot write the report to {output_file}: {problem}")
    else:
        click.echo(text, nl=False)


def settings_or_exit(config_file: str | None, isolated: bool) -> Settings:
    try:
        return load_settings(config_file, isolated)
    except ConfigError as exc:
        fail(str(exc))
        raise AssertionError("unreachable")


def creatable_folder_problem(folder: str) -> str | None:
    """Why ``folder`` cannot be created (or written into), or None: checked without creating
    anything, so a refused run leaves no empty folder behind."""
    import os

    path = os.path.abspath(folder)
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"{probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"permission denied: {probe}"
    return None


def output_problem(path: str) -> str | None:
    """Why the report file ``path`` cannot be written (its folder may be missing: it is created)."""
    import os

    problem = creatable_folder_problem(os.path.dirname(os.path.abspath(path)))
    if problem is None and os.path.isdir(path):
        problem = f"{path} is a folder"
    return problem


def check_triton_version(value: str | None) -> None:
    """``--triton-version``: X.Y or X.Y.Z, else a usage error (exit 2)."""
    if value is not None:
        from tilefit.versions import is_version

        if not is_version(value):
            fail(f"--triton-version {value!r} is not a version (X.Y or X.Y.Z)")


def check_output(path: str | None, what: str = "the report") -> None:
    """Refuse an ``-o FILE`` (or another file a command writes at its end) that cannot be written,
    before any work (one line, exit 2)."""
    problem = output_problem(path) if path else None
    if problem is not None:
        fail(f"cannot write {what} to {path}: {problem}")


def open_output(path: str):
    """``-o FILE`` opened for writing, its folder created as ruff does; a one-line error (exit 2)
    when that cannot be done."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    problem = output_problem(path)
    if problem is None:
        try:
            os.makedirs(folder, exist_ok=True)
            return open(path, "w", encoding="utf-8")
        except OSError as exc:
            problem = exc.strerror or str(exc)
    fail(f"cannot write the report to {path}: {problem}")
    raise AssertionError("unreachable")




def split_codes(values) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out
