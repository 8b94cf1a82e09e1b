"""A Python source file as bytes, text and AST, with the position arithmetic diagnostics need.

``ast`` reports ``col_offset`` in UTF-8 *bytes* from the start of the line; diagnostics carry
1-based *character* columns and byte offsets into the file. :meth:`SourceFile.span` converts.
``# noqa`` comments follow ruff's grammar: ``# noqa`` alone suppresses every code on its line,
``# noqa: CODE1, CODE2`` (commas and/or spaces, ``noqa`` in any case) only those codes.
"""

from __future__ import annotations

import array
import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from tilefit.model import Position, Span

_BOM = b"\xef\xbb\xbf"
# ruff: `# noqa` optionally followed by `:` and codes separated by commas and/or whitespace.
_NOQA = re.compile(r"#\s*(?i:noqa)(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?")


@dataclass(frozen=True)
class Noqa:
    """A ``# noqa`` directive: ``codes`` is ``None`` for a bare ``# noqa`` (every code)."""

    codes: frozenset[str] | None

    def suppresses(self, code: str) -> bool:
        return self.codes is None or code in self.codes


@dataclass
class SourceFile:
    path: str
    _raw: bytes | None  # the file's bytes; None when they are the text's (ASCII, after a BOM if any)
    text: str = ""
    tree: ast.Module | None = None
    error: str | None = None  # why the file could not be read or parsed
    _line_starts: "array.array[int]" = field(default_factory=lambda: array.array("q"), repr=False)
    _noqa: dict[int, Noqa] | None = field(default=None, repr=False)
    _bom: int = field(default=0, repr=False)  # 3 when the file starts with a UTF-8 BOM

    @property
    def data(self) -> bytes:
        """The file's bytes (an ASCII file holds only its text: a byte offset is a character's)."""
        if self._raw is None:
            return (_BOM if self._bom else b"") + self.text.encode("ascii")
        return self._raw

    @classmethod
    def read(cls, path: str, parse: bool = True) -> "SourceFile":
        from tilefit.readfile import read_bytes

        try:
            data = read_bytes(path)
        except OSError as exc:
            return cls(path, b"", error=f"cannot read: {exc.strerror or exc}")
        return cls.from_bytes(path, data, parse=parse)

    @classmethod
    def from_bytes(cls, path: str, data: bytes, parse: bool = True) -> "SourceFile":
        src = cls(path, data)
        bom = data.startswith(_BOM)
        body = data[3:] if bom else data
        try:
            src.text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            src.error = f"not UTF-8: {exc}"
            return src
        if src.text.isascii():  # most source files: the text is the bytes (a whole engine's twice otherwise)
            src._raw, src._bom = None, 3 if bom else 0
        if parse:
            src.parse()
        return src

    def parse(self) -> ast.Module | None:
        if self.tree is None and self.error is None:
            try:
                self.tree = ast.parse(self.text, filename=self.path, type_comments=False)
            except SyntaxError as exc:
                self.error = f"syntax error at line {exc.lineno}: {exc.msg}"
            except (ValueError, RecursionError) as exc:  # null bytes, absurd nesting
                self.error = f"cannot parse: {exc}"
        return self.tree

    # -- positions ---------------------------------------------------------------------------
    @property
    def line_starts(self) -> "array.array[int]":
        """Byte offset of the start of each line (index 0 is line 1), counting a BOM: machine
        ints (a whole engine's files have millions of lines)."""
        if not self._line_starts:
            if self._raw is None:  # ASCII: offsets in the text, after the BOM
                base, buf, nl = self._bom, self.text, "\n"
            else:
                base, buf, nl = (3 if self._raw.startswith(_BOM) else 0), self._raw, b"\n"
            starts = array.array("q", [base])
            shift = base if self._raw is None else 0
            find = buf.find
            i = find(nl, 0 if self._raw is None else base)
            while i != -1:
                starts.append(i + 1 + shift)
                i = find(nl, i + 1)
            self._line_starts = starts
        return self._line_starts

    def _line_bytes(self, line: int) -> bytes:
        starts = self.line_starts
        start = starts[line - 1]
        end = starts[line] if line < len(starts) else len(self.data)
        return self.data[start:end]

    def position(self, line: int, col_bytes: int) -> tuple[Position, int]:
        """(1-based line and character column, byte offset) of ``ast``'s (lineno, col_offset)."""
        starts = self.line_starts
        line = max(1, min(line, len(starts)))
        if self._raw is None:  # ASCII: a byte is a character
            end = starts[line] if line < len(starts) else self._bom + len(self.text)
            col_chars = max(0, min(col_bytes, end - starts[line - 1]))
        else:
            raw = self._line_bytes(line)
            col_chars = len(raw[:col_bytes].decode("utf-8", "replace"))
        return Position(line, col_chars + 1), starts[line - 1] + col_bytes

    def span(self, node: ast.AST) -> Span:
        start, start_off = self.position(node.lineno, node.col_offset)
        end_line = getattr(node, "end_lineno", None) or node.lineno
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = node.col_offset
        end, end_off = self.position(end_line, end_col)
        return Span(start, end, start_off, end_off)

    def segment(self, node: ast.AST, limit: int = 120) -> str:
        """The source text of ``node`` on one line, shortened to ``limit`` characters."""
        try:
            span = self.span(node)
            if self._raw is None and span.start_offset >= self._bom:  # ASCII: the text's characters
                text = self.text[span.start_offset - self._bom:max(span.end_offset - self._bom, 0)]
            else:
                text = self.data[span.start_offset:span.end_offset].decode("utf-8", "replace")
        except (AttributeError, IndexError, TypeError):
            text = ""
        text = " ".join((text or ast.unparse(node)).split())
        return text if len(text) <= limit else text[: limit - 1] + "\u2026"

    # -- noqa --------------------------------------------------------------------------------
    def noqa(self, line: int) -> Noqa | None:
        if self._noqa is None:
            self._noqa = self._collect_noqa()
        return self._noqa.get(line)

    def _collect_noqa(self) -> dict[int, Noqa]:
        out: dict[int, Noqa] = {}
        if "noqa" not in self.text.lower():
            return out
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(self.text).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            tokens = []
            for i, line in enumerate(self.text.splitlines(), 1):  # best effort: any `#` on the line
                pos = line.find("#")
                if pos != -1:
                    tokens.append(tokenize.TokenInfo(tokenize.COMMENT, line[pos:], (i, pos), (i, len(line)), line))
        for tok in tokens:
            if tok.type != tokenize.COMMENT:
                continue
            m = _NOQA.search(tok.string)
            if not m:
                continue
            codes = m.group("codes")
            out[tok.start[0]] = Noqa(None if codes is None else frozenset(re.split(r"[,\s]+", codes.strip())))
        return out
