"""Graphs and procedures that a notebook teaches and later notebooks reuse. The notebook that teaches one writes it
out in full; later notebooks import it from here. Each module names the notebook that teaches it and those that
reuse it."""

from ._common import new_graph  # noqa: E402  (the one public name of the private module)

__all__ = ["new_graph"]
