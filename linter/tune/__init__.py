"""`tilefit tune`: re-tune offending entries on a local GPU."""
