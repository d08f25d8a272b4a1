"""Feature gates: can this GPU and cuDNN run a feature, and if not, *why* not (one line)."""
from __future__ import annotations

from dataclasses import dataclass

from .device import backend_version, device_info, has_gpu
from .errors import FeatureUnavailable


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
    "native_cuda_graph":    ((0, 0), 90500, "cuDNN's native CUDA-graph API"),
    "override_shapes":      ((0, 0), 92100, "execute-time override shapes"),
}
_BLOCKED_BACKENDS = {"sdpa": {91000, 91001}, "sdpa_serving": {91000, 91001}}  # known-bad SDPA releases


def _fmt_backend(v: int) -> str:
    return f"{v // 10000}.{(v // 100) % 100}.{v % 100}"


def gate(feature: str) -> Gate:
    """Can this machine run ``feature``? ``Gate.ok`` plus a reason either way."""
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {sorted(FEATURES)}, got {feature!r}")
    min_sm, min_backend, what = FEATURES[feature]
    if not has_gpu():
        return Gate(feature, False, "no NVIDIA GPU is visible")
    d = device_info()
    if feature == "fp8" and d.sm[0] == 8 and d.sm < (8, 9):
        return Gate(feature, False, f"{what} needs sm89 (Ada) or sm90+ (Hopper); this {d.name} is sm{d.sm_version}")
    if d.sm < min_sm:
        return Gate(feature, False, f"{what} needs sm{10 * min_sm[0] + min_sm[1]}+; this {d.name} is sm{d.sm_version}")
    bv = backend_version()
    if bv == 0:
        return Gate(feature, False, "no libcudnn could be loaded")
    if bv < min_backend:
        return Gate(feature, False, f"{what} needs cuDNN backend ≥ {_fmt_backend(min_backend)}; loaded {_fmt_backend(bv)}")
    if bv in _BLOCKED_BACKENDS.get(feature, ()):
        return Gate(feature, False, f"cuDNN {_fmt_backend(bv)} has known {what} bugs; upgrade the backend")
    return Gate(feature, True, f"supported on {d.name} (sm{d.sm_version}) with cuDNN {_fmt_backend(bv)}")


def feature_table():
    """A pandas table: feature, supported?, reason."""
    import pandas as pd

    rows = [{"feature": FEATURES[f][2], "key": f, "supported": g.ok, "why": g.reason} for f in FEATURES for g in [gate(f)]]
    return pd.DataFrame(rows).set_index("key")


def notebook_requirements_met(requires: dict) -> tuple[bool, str]:
    """Evaluate a notebook's ``requires`` metadata (gpu, min_sm, min_cudnn, features)."""
    if requires.get("gpu", True) and not has_gpu():
        return False, "no NVIDIA GPU: this notebook re-executes on a GPU only"
    if not has_gpu():
        return True, ""
    d = device_info()
    min_sm = requires.get("min_sm")
    if min_sm and d.sm_version < int(min_sm):
        return False, f"needs sm{min_sm}+, this {d.name} is sm{d.sm_version}"
    for feature in requires.get("features", []):
        g = gate(feature)
        if not g.ok:
            return False, f"{feature}: {g.reason}"
    return True, ""
