"""Where tilefit keeps caches, and a log of contents that passed a validation.

``$TILEFIT_CACHE_DIR`` (an empty value turns caching off), else
``platformdirs.user_cache_dir("tilefit")``. The rule is defined once, in the device database
(:mod:`tilefit.device_db.cache`, the bottom layer, which imports nothing else of tilefit); the
app reads it here.
"""

from __future__ import annotations

from tilefit.device_db.cache import ENV_VAR, ValidityCache, cache_root

__all__ = ["ENV_VAR", "ValidityCache", "cache_root"]
