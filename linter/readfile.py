"""The one way tilefit reads a file it was pointed at: a regular file, at most ``limit`` bytes.

Every input file (tuning tables, Python sources, ``pyproject.toml``, baselines, device and
coefficient files, cache records) is read through :func:`read_bytes`. A path can name anything
a folder holds: a FIFO (``open`` blocks until a writer comes, forever in a pre-commit hook), a
character device (a symlink to ``/dev/zero`` reads until the memory is gone), a socket, or a
regular file of gigabytes. So the file is opened without blocking, ``fstat`` of the open file
(not of the name, which may change in between) must say it is a regular file, and at most
``limit + 1`` bytes are read: more is refused. A file is read in one ``read`` of its size and one
byte more (four system calls a file: open, fstat, read, close). Each refusal is an :class:`OSError` whose
``strerror`` says what happened, so every caller's existing ``except OSError`` turns it into its
usual diagnostic (IO001 for a table) or message.

The default cap is :data:`DEFAULT_LIMIT` (64 MiB, several times the largest real table);
``[tool.tilefit] max-file-size`` changes it for tables and Python files.
"""

from __future__ import annotations

import errno
import os
import stat

DEFAULT_LIMIT = 64 * 1024 * 1024
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """The path names something other than a regular file (a FIFO, a device, a socket)."""


class FileTooLarge(OSError):
    """The file holds more than the size limit."""


def kind_of(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def format_size(n: int) -> str:
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n} bytes"


def read_bytes(path: str | os.PathLike, limit: int | None = DEFAULT_LIMIT) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), at most ``limit`` of them
    (``None``: no cap). Raises :class:`NotRegularFile`, :class:`FileTooLarge` or the
    ``OSError`` of the failed open/read; never blocks on a FIFO."""
    path = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFile(errno.EISDIR, "is a directory, not a regular file", path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, f"is {kind_of(st.st_mode)}, not a regular file", path)
        if limit is not None and st.st_size > limit:
            raise FileTooLarge(errno.EFBIG, f"is {format_size(st.st_size)}, over the {format_size(limit)} limit "
                                            "(max-file-size)", path)
        chunks = []
        total = 0
        cap = None if limit is None else limit + 1
        # the first read asks for the whole file and one byte more: a file that did not change since
        # fstat is read in one read, whose short count says it ended (no second read to see EOF;
        # a file whose size fstat does not know, as in /proc, is read until a read returns nothing)
        want = st.st_size + 1
        while True:
            if cap is not None:
                want = min(want, cap - total)
            if want <= 0:
                break
            try:
                chunk = os.read(fd, want)
            except BlockingIOError:  # O_NONBLOCK does not apply to regular files; were it ever to
                os.set_blocking(fd, True)
                chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < want and total == st.st_size:  # short, and all fstat counted: its end
                break
            want = _CHUNK
        if limit is not None and total > limit:  # it grew while we read
            raise FileTooLarge(errno.EFBIG, f"is over the {format_size(limit)} limit (max-file-size)", path)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, limit: int | None = DEFAULT_LIMIT, encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded (``UnicodeDecodeError`` on bad bytes)."""
    return read_bytes(path, limit).decode(encoding)
