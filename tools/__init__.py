"""Maintainer tooling that the notebooks never import: the executor (``python -m tools.execute``)
and the notebook metadata and stored-output checks (``python -m tools.notebooks``). Run from a checkout."""
