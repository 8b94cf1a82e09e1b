"""`tilefit doctor`: model shape + engine profile + device -> verdict per kernel and batch size."""
