"""Feature gates: can this GPU and cuDNN run a feature, and if not, *why* not (one line)."""
from __future__ import annotations

from dataclasses import dataclass

from .device import backend_version, device_info, has_gpu
from .errors import FeatureUnavailable
from .libcudnn import version_string


@dataclass(frozen=True)
class Gate:
    feature: str
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok

    def require(self) -> None:
        """Stop here with one clear line when the feature is missing."""
        if not self.ok:
            raise FeatureUnavailable(f"{self.feature}: {self.reason}")


# feature -> (minimum SM as (major, minor), minimum backend as int, human description)
FEATURES = {
    "bf16":                 ((8, 0), 0,     "bfloat16 tensor cores"),
    "sdpa":                 ((8, 0), 90000, "fused attention (SDPA) forward and backward"),
    "fp8":                  ((8, 9), 90100, "FP8 (e4m3) matmul"),
    "sdpa_serving":         ((8, 0), 90500, "serving attention: bottom-right causal, padding masks, paged KV caches"),
    "sdpa_fp8":             ((9, 0), 90100, "FP8 (e4m3) fused attention"),
    "kernel_cache":         ((0, 0), 90400, "kernel cache / dynamic shapes"),
    "kernel_cache_serialize": ((0, 0), 91000, "serializing a kernel cache"),
    "native_cuda_graph":    ((0, 0), 90500, "cuDNN's native CUDA-graph API (with cuda-python's cuda.bindings)"),
    "override_shapes":      ((0, 0), 92100, "execute-time override shapes"),
    "graph_wrapper":        ((0, 0), 91200, "the high-level cudnn.Graph wrapper"),
    # NVIDIA documents its fused norm engines from SM80 (Ampere) on; not verified on an older GPU here
    "norm_graphs":          ((8, 0), 90000, "BatchNorm, LayerNorm and RMSNorm graphs (forward and backward)"),
}
_BLOCKED_BACKENDS = {"sdpa": {91000, 91001}, "sdpa_serving": {91000, 91001}}  # known-bad SDPA releases


def gate_for(feature: str, name: str, sm: tuple[int, int], backend: int) -> Gate:
    """Could a GPU named ``name`` with compute capability ``sm`` run ``feature`` with cuDNN backend ``backend``
    (an int, 9.19.0 -> 91900)? The SM and version rules alone: no GPU or library is touched, so the
    course's tables and tests can ask it for any GPU (``helpers.device.PROFILES``)."""
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {sorted(FEATURES)}, got {feature!r}")
    min_sm, min_backend, what = FEATURES[feature]
    sm = tuple(sm)
    sm_version = 10 * sm[0] + sm[1]
    if feature == "fp8" and sm[0] == 8 and sm < (8, 9):
        return Gate(feature, False, f"{what} needs sm89 (Ada) or sm90+ (Hopper); this {name} is sm{sm_version}")
    if sm < min_sm:
        return Gate(feature, False, f"{what} needs sm{10 * min_sm[0] + min_sm[1]}+; this {name} is sm{sm_version}")
    if backend == 0:
        return Gate(feature, False, "no libcudnn could be loaded")
    if backend < min_backend:
        return Gate(feature, False, f"{what} needs cuDNN backend ≥ {version_string(min_backend)}; loaded {version_string(backend)}")
    if backend in _BLOCKED_BACKENDS.get(feature, ()):
        return Gate(feature, False, f"cuDNN {version_string(backend)} has known {what} bugs; upgrade the backend")
    return Gate(feature, True, f"supported on {name} (sm{sm_version}) with cuDNN {version_string(backend)}")


def gate(feature: str) -> Gate:
    """Can this machine run ``feature``? ``Gate.ok`` plus a reason either way. Under a ``COURSE_GPU`` profile the
    GPU is the profile's (``helpers.device``)."""
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {sorted(FEATURES)}, got {feature!r}")
    if not has_gpu():
        return Gate(feature, False, "no NVIDIA GPU is visible")
    d = device_info()
    verdict = gate_for(feature, d.name, d.sm, backend_version())
    if verdict.ok and feature == "native_cuda_graph":
        missing = _native_graph_prerequisite()
        if missing:
            return Gate(feature, False, missing)
    return verdict


def _native_graph_prerequisite() -> str | None:
    """Why the native CUDA-graph API cannot be driven from Python here (CUDA < 12, no cuda-python), or None."""
    import torch

    cuda = torch.version.cuda or "0"
    if int(cuda.split(".")[0]) < 12:
        return f"cuDNN's native CUDA-graph API needs CUDA ≥ 12; torch is built with CUDA {cuda}"
    try:
        from cuda.bindings import runtime  # noqa: F401  (cuda-python: creates and launches the CUDA graph)
    except Exception as exc:  # not installed, or a build that does not match the driver
        return f"cuda-python is not importable ({type(exc).__name__}); install it with `pip install cuda-python`"
    return None


def feature_table():
    """A pandas table: feature, supported?, reason."""
    import pandas as pd

    rows = [{"feature": FEATURES[f][2], "key": f, "supported": g.ok, "why": g.reason} for f in FEATURES for g in [gate(f)]]
    return pd.DataFrame(rows).set_index("key")


def missing_feature(features, gate_fn=None) -> str | None:
    """``'feature: reason'`` for the first of ``features`` this machine (or ``gate_fn``, a ``feature -> Gate``)
    lacks, or None: the one rule the harness, the exercise grader and the notebook requirements share."""
    gate_fn = gate_fn or gate
    for feature in features:
        g = gate_fn(feature)
        if not g.ok:
            return f"{feature}: {g.reason}"
    return None


def _requirements_unmet(requires: dict, name: str, sm_version: int, gate_fn) -> str | None:
    min_sm = requires.get("min_sm")
    if min_sm and sm_version < int(min_sm):
        return f"needs sm{min_sm}+, this {name} is sm{sm_version}"
    return missing_feature(requires.get("features", []), gate_fn)


def notebook_requirements_met(requires: dict) -> tuple[bool, str]:
    """Evaluate a notebook's needs (gpu, min_sm, features: ``tools.gates.read_needs(nb).requires``) on this
    machine."""
    if requires.get("gpu", True) and not has_gpu():
        return False, "no NVIDIA GPU: this notebook re-executes on a GPU only"
    if not has_gpu():
        return True, ""
    d = device_info()
    why = _requirements_unmet(requires, d.name, d.sm_version, gate)
    return why is None, why or ""


def requirements_met_on(requires: dict, name: str, sm: tuple[int, int], backend: int) -> tuple[bool, str]:
    """``notebook_requirements_met`` for any GPU (name, compute capability) and backend: the rules alone."""
    why = _requirements_unmet(requires, name, 10 * sm[0] + sm[1], lambda f: gate_for(f, name, sm, backend))
    return why is None, why or ""
