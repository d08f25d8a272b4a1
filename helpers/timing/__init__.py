"""Timing, one module per clock (the website's layout page lists them). Notebooks reach these through ``H``."""
