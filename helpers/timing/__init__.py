"""Timing, one module per clock (the README's layout lists them). Notebooks reach these through ``H``."""
