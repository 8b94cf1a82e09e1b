"""One module per ``tilefit`` command."""
