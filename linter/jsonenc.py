"""JSON encoders built once: ``json.dumps(value, default=str)`` (and with ``sort_keys=True``)
construct a ``JSONEncoder`` on every call, and a check encodes a few values per diagnostic (its
merge key, the entry's identity, the result cache's rows). Same text as ``json.dumps`` with
those arguments."""

from __future__ import annotations

import json

dumps_default_str = json.JSONEncoder(default=str).encode  # json.dumps(value, default=str)
dumps_sorted_default_str = json.JSONEncoder(default=str, sort_keys=True).encode  # ... sort_keys=True
