"""Exceptions of the device database.

* :class:`DeviceDBError`: a device or group file is unreadable, not JSON, breaks the schema, or
  clashes with another device (duplicate key, alias or name). The message is one line that names
  the file and the JSON path of the problem, ready to print without a traceback.
* :class:`UnknownDevice`: :meth:`DeviceDB.get` / :meth:`DeviceDB.arch_device` found nothing.
* :class:`UnknownTarget`: :meth:`DeviceDB.resolve_target` could not read a ``--target`` value.

The lookup errors carry ``query`` and ``suggestions`` (close matches) for callers that format
their own messages.
"""

from __future__ import annotations

from typing import Sequence


class DeviceDBError(Exception):
    """The device database (bundled or a user file) cannot be loaded."""


class UnknownDevice(KeyError):
    """No device has this key (or no arch entry has this arch name)."""

    def __init__(self, message: str, query: str = "", suggestions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.query = query
        self.suggestions = tuple(suggestions)

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return self.message


class UnknownTarget(UnknownDevice):
    """A ``--target`` value matched no device, alias, file name, arch or group."""
