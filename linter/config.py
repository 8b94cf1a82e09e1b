"""``[tool.tilefit]`` in pyproject.toml, merged with the command line (the command line wins).

The nearest ``pyproject.toml`` with a ``[tool.tilefit]`` table, searched from the current
folder upwards, is used (ruff's "closest wins", no implicit merge); ``--config FILE`` names one
explicitly and ``--isolated`` ignores all. Unknown keys and wrong types are errors (exit 2):
a typo in a linter's config must not silently disable a check.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .readfile import DEFAULT_LIMIT, read_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
    pass


@dataclass
class Settings:
    targets: list[str] = field(default_factory=list)
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    respect_gitignore: bool = True
    estimator: str = "auto"
    estimator_margin: int = 4096
    compile_timeout: int = 120  # seconds a compile may take (tilefit.smem.worker); then EST001
    extend_device_db: list[str] = field(default_factory=list)
    baseline: str | None = None
    output_format: str = "concise"
    triton_version: str | None = None
    fix_margin: int = 0
    unsafe_fixes: bool = False
    # Tables and Python files larger than this are refused (IO001), never read into memory.
    max_file_size: int = DEFAULT_LIMIT
    # [tool.tilefit.kernels."module:function"]: parameter -> dtypes (pointers) or values, for the
    # kernel call sites of Python files (tilefit.callsites).
    kernels: dict[str, dict[str, list]] = field(default_factory=dict)
    # [tool.tilefit] scenario = [...]: the shape scenarios call sites are evaluated under;
    # [tool.tilefit.scenarios.NAME]: a project's own (tilefit.callsites.scenarios.from_table).
    scenario: list[str] = field(default_factory=list)
    scenario_tables: dict[str, dict] = field(default_factory=dict)
    # [tool.tilefit.rules.CODE]: per-rule options, validated against the rule's declared ones.
    rule_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Where the config came from, for messages and for resolving relative paths.
    config_file: str | None = None

    @property
    def root(self) -> Path:
        """The project root: the folder of the pyproject.toml the settings came from (absolute),
        else the current folder. Globs, the baseline's paths and the paths of SARIF and GitLab
        reports are relative to it."""
        return Path(self.config_file).resolve().parent if self.config_file else Path.cwd()


# key in TOML -> (attribute, expected type)
_KEYS: dict[str, tuple[str, type]] = {
    "targets": ("targets", list),
    "select": ("select", list),
    "extend-select": ("extend_select", list),
    "ignore": ("ignore", list),
    "per-file-ignores": ("per_file_ignores", dict),
    "exclude": ("exclude", list),
    "extend-exclude": ("extend_exclude", list),
    "respect-gitignore": ("respect_gitignore", bool),
    "estimator": ("estimator", str),
    "estimator-margin": ("estimator_margin", int),
    "compile-timeout": ("compile_timeout", int),
    "extend-device-db": ("extend_device_db", list),
    "baseline": ("baseline", str),
    "output-format": ("output_format", str),
    "triton-version": ("triton_version", str),
    "fix-margin": ("fix_margin", int),
    "unsafe-fixes": ("unsafe_fixes", bool),
    "max-file-size": ("max_file_size", int),
    "kernels": ("kernels", dict),
    "scenario": ("scenario", list),
    "scenarios": ("scenario_tables", dict),
    "rules": ("rule_options", dict),
}


def _read_toml(path: Path) -> dict[str, Any]:
    """A pyproject.toml parsed; a file that cannot be read or decoded is an error, not skipped
    (skipping it would silently lint with defaults a project thought it had configured)."""
    try:
        text = read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          "TOML files must be UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _tilefit_table(data: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """``[tool.tilefit]`` of a parsed pyproject.toml, None when absent; an error when ``tool`` or
    ``tool.tilefit`` is not a table."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, got {_toml_type(tool)}")
    table = tool.get("tilefit")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.tilefit` must be a table ([tool.tilefit]), got {_toml_type(table)}")
    return table


def _toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def find_config(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml with a [tool.tilefit] table, from ``start`` upwards."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            if _tilefit_table(_read_toml(candidate), candidate) is not None:
                return candidate
    return None


def load_settings(config_file: str | Path | None = None, isolated: bool = False) -> Settings:
    if isolated:
        return Settings()
    path = Path(config_file) if config_file else find_config()
    if path is None:
        return Settings()
    table = _tilefit_table(_read_toml(path), path)
    if table is None:
        if config_file:
            raise ConfigError(f"{path} has no [tool.tilefit] table")
        return Settings()
    return settings_from_table(table, str(path))


def settings_from_table(table: dict[str, Any], source: str) -> Settings:
    settings = Settings(config_file=source)
    for key, value in table.items():
        if key not in _KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), list(_KEYS), n=1, cutoff=0.7)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{source}: unknown key [tool.tilefit] {key!r}{hint}; known: {', '.join(_KEYS)}")
        attr, kind = _KEYS[key]
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise ConfigError(f"{source}: [tool.tilefit] {key} must be a {kind.__name__}, got {type(value).__name__}")
        if attr == "max_file_size" and value <= 0:
            raise ConfigError(f"{source}: [tool.tilefit] max-file-size must be a positive number of bytes")
        if attr == "compile_timeout" and value <= 0:
            raise ConfigError(f"{source}: [tool.tilefit] compile-timeout must be a positive number of seconds")
        if kind is list and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: [tool.tilefit] {key} must be a list of strings")
        if attr == "per_file_ignores":
            for pattern, codes in value.items():
                if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                    raise ConfigError(f"{source}: per-file-ignores {pattern!r} must map to a list of codes")
                _check_scope(pattern, source)
        if attr == "kernels":
            value = validate_kernels(value, source)
        if attr == "rule_options":
            from tilefit.rules import validate_rule_options

            try:
                value = validate_rule_options(value, source)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        setattr(settings, attr, value)
    return settings


def _check_scope(pattern: str, source: str) -> None:
    """A per-file ignore's ``#/json/pointer`` suffix must be an RFC 6901 pointer."""
    from .jsonpos import PointerError, parse_pointer

    _, sep, pointer = pattern.partition("#")
    if sep:
        try:
            parse_pointer(pointer)
        except PointerError as exc:
            raise ConfigError(f"{source}: per-file-ignores {pattern!r}: {exc} (e.g. \"file.json#/4096\")") from None


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_kernels(table: dict[str, Any], source: str) -> dict[str, dict[str, list]]:
    """``[tool.tilefit.kernels]``: ``"module:function"`` -> {parameter: value or list of values}.

    A key names a kernel by its dotted module (or a trailing part of it, or a ``.py`` path) and
    function. Parameters are names of the kernel (``"K_Buffer,V_Buffer"`` varies several
    together); values are dtype names for pointers (``"bf16"``, ``"fp8e4nv"``) or constexpr /
    int values, one value or a non-empty list of values of one type. Lists become lists.
    """
    out: dict[str, dict[str, list]] = {}
    for key, params in table.items():
        where = f"{source}: [tool.tilefit.kernels.{key!r}]"
        mod, sep, fn = key.rpartition(":")
        if not sep or not mod or not _IDENT.match(fn):
            raise ConfigError(f"{where}: the key must be \"module:function\" (e.g. \"pkg.ops.decode:_fwd_kernel\")")
        if not isinstance(params, dict):
            raise ConfigError(f"{where} must be a table of parameter = values")
        entry: dict[str, list] = {}
        for names, values in params.items():
            parts = [n.strip() for n in names.split(",")]
            if not parts or not all(_IDENT.match(n) for n in parts):
                raise ConfigError(f"{where}: {names!r} is not a parameter name (or comma-separated names)")
            values = values if isinstance(values, list) else [values]
            if not values:
                raise ConfigError(f"{where}: {names} has an empty list")
            kinds = {type(v) for v in values}
            if not kinds <= {str, int, float, bool} or len(kinds) > 1 and kinds != {int, float}:
                raise ConfigError(f"{where}: {names} must be one type of value: dtype names, ints, floats or "
                                  f"booleans (got {', '.join(sorted(k.__name__ for k in kinds))})")
            entry[",".join(parts)] = list(values)
        out[key] = entry
    return out


def resolve_relative(settings: Settings, path: str) -> str:
    """Paths in the config are relative to the config file's folder."""
    if os.path.isabs(path) or settings.config_file is None:
        return path
    return str(settings.root / path)


def setting_names() -> list[str]:
    return [f.name for f in fields(Settings)]
