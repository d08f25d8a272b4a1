"""Exceptions the helpers raise. Each one carries a single, actionable line."""


class CourseError(RuntimeError):
    """Base class. In Jupyter only the message is shown, not a traceback."""

    def _render_traceback_(self):  # IPython hook: show one clear line
        return [f"{type(self).__name__}: {self}"]


class NoGPUError(CourseError):
    """No usable NVIDIA GPU is visible to PyTorch."""


class CudnnNotFoundError(CourseError):
    """No loadable libcudnn was found."""


class FeatureUnavailable(CourseError):
    """The GPU or cuDNN version lacks a feature this code needs."""
