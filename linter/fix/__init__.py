"""The fixer: candidate configs, ranking, and byte-exact edits."""
