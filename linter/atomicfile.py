"""Replace a file in one step, so that no reader (or a crash) ever sees half of it.

The data goes to a temporary file in the target's folder, then ``os.replace`` swaps it in; on
any failure the temporary file is removed and the target is as it was. Every file tilefit
writes (fixed tables, tables the doctor writes, baselines, calibration data, caches) goes
through :func:`write_atomic`.
"""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str | os.PathLike, data: bytes | str, *, mode: int | None = None,
                 durable: bool = False) -> None:
    """Write ``data`` (``str`` as UTF-8) to ``path`` atomically. ``mode``: permission bits of the
    new file; ``durable``: fsync before the swap. Raises ``OSError``."""
    path = os.fspath(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tilefit-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
