"""Output formats. One module per format, each with ``render(diagnostics, stream, context)``;
``REPORTERS`` maps the ``--output-format`` name to it, so the CLI never branches on the format."""

from __future__ import annotations

from . import concise, full, github, gitlab, json_format, sarif

REPORTERS = {
    "concise": concise.render,
    "full": full.render,
    "json": json_format.render,
    "sarif": sarif.render,
    "github": github.render,
    "gitlab": gitlab.render,
}
