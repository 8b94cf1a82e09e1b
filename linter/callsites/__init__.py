"""Kernel call sites in Python sources: static scan, resolution, evaluation."""
