"""Exceptions the helpers raise. Each one carries a single, actionable line."""


class CourseError(RuntimeError):
    """Base class. In Jupyter only the message is shown, not a traceback."""

    def _render_traceback_(self):  # IPython hook: show one clear line
        return [f"{type(self).__name__}: {self}"]


class NoGPUError(CourseError):
    """No usable NVIDIA GPU is visible to PyTorch."""


class CudnnNotFoundError(CourseError):
    """No loadable libcudnn was found."""


class CudnnLoadError(CudnnNotFoundError):
    """A libcudnn file was found but cannot be loaded (empty, cut short, not a shared library)."""


class CudnnVersionError(CudnnNotFoundError):
    """The loaded libcudnn is not a cuDNN 9, or two copies of cuDNN are mixed in one process."""


class FeatureUnavailable(CourseError):
    """The GPU or cuDNN version lacks a feature this code needs."""


def one_line(text) -> str:
    """``text`` with every run of whitespace, newlines included, made one space: a message for a CourseError."""
    return " ".join(str(text).split())


def first_line(exc: BaseException, width: int = 110) -> str:
    """``TypeName: first line of the message`` (cut to ``width``): how the notebooks report a refusal
    (an engine that declines a graph, a backend torch cannot run) in a table cell or one printed line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:width]}" if lines else type(exc).__name__


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """``Category: message``, without Python's ``/path/to/file.py:123:`` prefix and source line.

    The default format puts the absolute path of whichever file warned into the notebook's stored
    stderr, which then differs on every machine (and fails nbval there)."""
    return f"{category.__name__}: {message}\n"


def compact_warnings() -> None:
    """Show warnings as ``Category: message`` from now on, in this process. A notebook's setup cell calls it
    (importing ``helpers`` changes nothing of the kind), so stored outputs hold no machine's file paths."""
    import warnings

    warnings.formatwarning = _format_warning
