"""Every file tilefit writes, and how: its own files replaced whole, the user's rewritten in place.

Two writers, one naming scheme for their temporary files:

* :func:`write_atomic` for the files tilefit owns (caches, baselines, reports, calibration
  data, tables the doctor creates): the data goes to a temporary file in the target's folder,
  then ``os.replace`` swaps it in, so no reader (or a crash) ever sees half of it.
* :func:`rewrite_in_place` for the user's files (``--fix``): what ruff does. The new text is
  written over the file's content, so the file keeps its inode: its owner and group (even when
  tilefit runs as root), mode, ACLs, extended attributes and hard links. It refuses a
  read-only file, a file that changed since it was read, and a symlink whose target lies
  outside the checked paths (unless ``follow_symlinks``). Before touching the file it writes
  the new and the old text to a *recovery file* beside it and flushes it to disk, so a run
  killed half-way through the write is repaired by the next one (:func:`clean_folder`): a file
  that holds exactly what an interrupted write leaves (the new text's start, the old text's
  rest) gets the new text; any other content (old, new, or edited by hand since) is left alone
  and the recovery file removed. The compare-and-write holds an advisory ``flock`` on the
  file, so concurrent runs fixing one file take turns; a run that finds the file already
  holding what it would write (another run fixed it the same way) leaves it be.

Temporary names are ``.<name>.tilefit-<pid>-<tag>.tmp``: hidden, never ``.json`` or ``.py`` (so
never linted), and they carry the writer's process id, so a later run removes only those of
processes that are gone (:func:`clean_folder`), never a concurrent run's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass

_TEMP = re.compile(r"^\.(?P<name>.+)\.tilefit-(?P<pid>\d+)-(?P<kind>[rw])(?P<tag>[0-9a-f]{12})\.tmp$")
_LEGACY = re.compile(r"^\.tilefit-[A-Za-z0-9_]{6,}\.tmp$")  # mkstemp names of earlier versions


class WriteRefused(OSError):
    """tilefit will not write this file (read-only, changed meanwhile, a symlink out of the
    checked paths); the message says why and what to do."""


def temp_name(target: str, kind: str = "r", tag: str | None = None) -> str:
    return f".{os.path.basename(target)}.tilefit-{os.getpid()}-{kind}{tag or secrets.token_hex(6)}.tmp"


def is_temporary(name: str) -> bool:
    """Whether a file name is one of tilefit's temporary files (never a file to lint)."""
    return bool(_TEMP.match(name) or _LEGACY.match(name))


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_new(path: str, payload: bytes, durable: bool, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes | str, *, mode: int | None = None,
                 durable: bool = False) -> None:
    """Write ``data`` (``str`` as UTF-8) to ``path`` atomically (temporary file, ``os.replace``).
    ``mode``: permission bits of the new file (default: as ``open`` creates files, 0666 less the
    umask); ``durable``: fsync before the swap. Raises ``OSError``."""
    path = os.fspath(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, temp_name(path))
    try:
        _write_new(tmp, payload, durable, 0o666 if mode is None else 0o600)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        if durable:
            _fsync_folder(folder)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def within(path: str, roots) -> bool:
    """Whether the real path ``path`` is one of ``roots`` (real paths) or inside one."""
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return True
    return False


def checked_roots(paths) -> tuple[str, ...]:
    """The real folders a run may write in: each folder given, and each given file's folder."""
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out.append(os.path.realpath(p))
        else:
            out.append(os.path.realpath(os.path.dirname(os.path.abspath(p))))
    return tuple(dict.fromkeys(out))


_RECOVERY = b"tilefit recovery 1\n"


def _torn(current: bytes, new: bytes, old: bytes) -> bool:
    """Whether ``current`` is a state an interrupted :func:`_overwrite` of ``old`` with ``new``
    leaves: ``new[:k] + old[k:]`` for some k (written from the start, not yet truncated), or a
    prefix of ``new`` longer than ``old``. A file edited by hand since is none of these."""
    if current in (new, old):
        return False
    if len(current) > len(old):
        return new.startswith(current)
    if len(current) != len(old):
        return False
    p = 0  # common prefix with new
    n = min(len(current), len(new))
    while p < n and current[p] == new[p]:
        p += 1
    j = len(current)  # current[j:] == old[j:]
    while j > 0 and current[j - 1] == old[j - 1]:
        j -= 1
    return j <= p


def _read_recovery(path: str) -> tuple[bytes, bytes] | None:
    from .readfile import read_bytes

    try:
        blob = read_bytes(path, None)
    except OSError:
        return None
    if not blob.startswith(_RECOVERY):
        return None
    head, sep, rest = blob[len(_RECOVERY):].partition(b"\n")
    if not sep or not head.isdigit() or int(head) > len(rest):
        return None
    n = int(head)
    return rest[:n], rest[n:]


def rewrite_in_place(path: str | os.PathLike, data: bytes, *, expected: bytes | None = None,
                     roots=None, follow_symlinks: bool = False) -> str:
    """Replace the content of the user's file ``path`` with ``data``, keeping its inode (owner,
    mode, links). Returns the real path written. Raises :class:`WriteRefused` (read-only, not
    a regular file, changed since read: ``expected`` is what was read, a symlink to outside
    ``roots`` without ``follow_symlinks``) or the ``OSError`` of the write."""
    from .readfile import read_bytes

    path = os.fspath(path)
    real = os.path.realpath(path)
    if not follow_symlinks and roots is not None and not within(real, roots):
        raise WriteRefused(errno.EPERM, f"is a symlink to {real}, outside the checked paths; not written "
                                        "(--follow-symlinks writes there)", path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise WriteRefused(errno.EINVAL, "is not a regular file; not written", path)
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(real, os.W_OK):
        raise WriteRefused(errno.EACCES, f"is read-only (mode {stat.S_IMODE(st.st_mode):04o}); not written "
                                         "(make it writable to fix it)", path)
    with _exclusive(real, path):  # two fixes of one file, one after the other (concurrent runs)
        old = read_bytes(real, None)
        if old == data:  # already what we would write (a concurrent run fixed it the same way)
            return real
        if expected is not None and old != expected:
            raise WriteRefused(errno.EBUSY, "changed on disk since it was read; not written", path)
        _replace_content(real, old, data)
    return real


# how long a fix waits for another tilefit process writing the same file
LOCK_WAIT_S = 30.0


@contextlib.contextmanager
def _exclusive(real: str, shown: str):
    """Hold an advisory lock (``flock``) on ``real`` while it is compared and rewritten, so two
    tilefit runs fixing one file never interleave; where there is no ``flock``, no lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise WriteRefused(errno.EBUSY, f"another process has held a lock on it for {LOCK_WAIT_S:.0f} s; "
                                                    "not written", shown) from None
                time.sleep(0.05)
            except OSError:  # a file system without flock: go on unlocked
                break
        yield
    finally:
        os.close(fd)  # releases the lock


def _replace_content(real: str, old: bytes, data: bytes) -> None:
    folder = os.path.dirname(real)
    recovery = os.path.join(folder, temp_name(real, "w"))
    _write_new(recovery, _RECOVERY + b"%d\n" % len(data) + data + old, durable=True)
    _fsync_folder(folder)
    try:
        _overwrite(real, data)
    except BaseException:
        # the file may be half written: put the old content back, then drop the recovery file
        try:
            _overwrite(real, old)
        finally:
            _unlink(recovery)
        raise
    _unlink(recovery)


def _overwrite(path: str, payload: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        view = memoryview(payload)
        offset = 0
        while offset < len(payload):
            offset += os.pwrite(fd, view[offset:], offset) if hasattr(os, "pwrite") else _seek_write(fd, view, offset)
        os.ftruncate(fd, len(payload))
        os.fsync(fd)
    finally:
        os.close(fd)


def _seek_write(fd: int, view: memoryview, offset: int) -> int:  # pragma: no cover - no pwrite (Windows)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.write(fd, view[offset:])


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's live process
    return True


@dataclass
class Cleanup:
    removed: list[str]
    repaired: list[str]  # files a killed --fix had half written, written again from the recovery file


def clean_folder(folder: str | os.PathLike, cleanup: Cleanup | None = None) -> Cleanup:
    """Remove the temporary files of tilefit processes that are gone, in ``folder``; repair a
    file a killed ``--fix`` left half written (see the module docstring)."""
    from .readfile import read_bytes

    cleanup = cleanup or Cleanup([], [])
    try:
        names = os.listdir(folder)
    except OSError:
        return cleanup
    for name in names:
        m = _TEMP.match(name)
        full = os.path.join(folder, name)
        if m is None:
            if _LEGACY.match(name):
                _unlink(full)
                cleanup.removed.append(full)
            continue
        if _alive(int(m.group("pid"))):
            continue
        if m.group("kind") == "w":
            target = os.path.join(folder, m.group("name"))
            texts = _read_recovery(full)
            try:
                current = read_bytes(target, None)
            except OSError:
                current = None
            if texts is not None and current is not None and _torn(current, *texts):
                try:
                    _overwrite(target, texts[0])
                    cleanup.repaired.append(target)
                except OSError:
                    continue  # keep the recovery file: it holds the only complete new text
        _unlink(full)
        cleanup.removed.append(full)
    return cleanup


def clean_folders(folders) -> Cleanup:
    cleanup = Cleanup([], [])
    for folder in dict.fromkeys(os.fspath(f) for f in folders):
        clean_folder(folder, cleanup)
    return cleanup
