"""Programs the notebooks start in a fresh process (``python -m helpers.recipes.workers.<name>``), so that a
measurement sees what a new process sees: nothing built, nothing cached, nothing compiled.

plan_worker   notebook 06: cold-build or deserialize cuDNN execution plans
cache_worker  notebook 07: the first dynamic-shape build (empty kernel cache or one loaded from disk), and each MLP
              build mode (static, heuristics per shape, pinned) in a process of its own
"""
