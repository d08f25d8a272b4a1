"""Maintainer tooling, which the notebooks do not import (but for 01's deep dive B, which reads ``tools.gates``): the
executor (``python -m tools.execute``)
the notebook files, their stamps and stored-output checks (library modules), and their command line
(``python -m tools.cli``). Run from a checkout."""
