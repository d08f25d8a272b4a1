"""Plumbing one notebook needs and no other uses, one module per notebook it serves (each names it): not the cuDNN
API a notebook teaches (that stays in the notebook), not the graphs later notebooks reuse (``helpers.recipes``),
but the benchmark scaffolding and test benches around them."""
