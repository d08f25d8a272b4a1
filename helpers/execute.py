"""Kept so ``python -m helpers.execute`` (run from a checkout) still works: the executor is ``tools/execute.py``."""
import sys

if __name__ == "__main__":
    from tools.execute import main

    sys.exit(main())
