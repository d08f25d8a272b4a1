"""The CUDA runtime through cuda-python (``cuda.bindings.runtime``), for code that owns a CUDA graph itself:
cuDNN's native CUDA-graph API (notebook 08 and its exercise) creates, instantiates, launches and destroys one."""
from __future__ import annotations

from .errors import CourseError, FeatureUnavailable


def cudart():
    """The ``cuda.bindings.runtime`` module; ``FeatureUnavailable`` (one line) where cuda-python is missing."""
    try:
        from cuda.bindings import runtime
    except ImportError as exc:
        raise FeatureUnavailable(f"this needs cuda-python (pip install cuda-python): {exc}") from None
    return runtime


def cuda_call(result):
    """cuda.bindings returns ``(error, *values)``: the value (or a tuple of them) on success, else a
    ``CourseError`` naming the error."""
    err, *values = result
    if err != cudart().cudaError_t.cudaSuccess:
        raise CourseError(f"CUDA runtime call failed: {err}")
    return values[0] if len(values) == 1 else tuple(values)
