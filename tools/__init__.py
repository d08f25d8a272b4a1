"""Maintainer tooling that the notebooks never import: the executor (``python -m tools.execute``)
the notebook files, their stamps and stored-output checks (library modules), and their command line
(``python -m tools.cli``). Run from a checkout."""
