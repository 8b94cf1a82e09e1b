"""The performance model: predicted kernel time of a config on a device (pure Python).

>>> from tilefit.perf import predict, rank, shape_for, load_coefficients
>>> pred = predict(entry, shape_for(meta, 256), device)      # Prediction(time_us, ...)
>>> best = rank(candidates, shape, [device])[0].config

See :mod:`tilefit.perf.model` for the terms and :mod:`tilefit.perf.coefficients` for the data.
"""

from .coefficients import (CoefficientError, Coefficients, coefficient_files, load_coefficients,
                           write_coefficients)
from .model import Prediction, Ranked, peak_tflops, predict, predict_time, rank
from .shapes import GemmShape, moe_model, shape_for

__all__ = [
    "CoefficientError", "Coefficients", "GemmShape", "Prediction", "Ranked", "coefficient_files",
    "load_coefficients", "moe_model", "peak_tflops", "predict", "predict_time", "rank", "shape_for", "write_coefficients",
]
