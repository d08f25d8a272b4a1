"""A reviewer's reasons that a comparative in the prose holds on every run, though no printed verdict backs it.

    (notebook, markdown cell id, word) -> the reason, in one line

``python -m tools.claims --comparatives`` shows the reason next to the entry and names keys that no longer match
an entry (the prose or the cell changed: review it again). Words are as in ``tools.claims.COMPARATIVE_WORDS``.
Example: ``("02", "227589c0", "faster"): "bias + ReLU in the epilogue saves two passes over Y on any GPU"``.
"""

REVIEWED: dict[tuple[str, str, str], str] = {
}
