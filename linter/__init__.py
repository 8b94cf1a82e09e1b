"""tilefit: Triton kernel tuning configs that fit the GPUs people own."""

__version__ = "0.1.0"
