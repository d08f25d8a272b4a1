"""The maintainer's commands over the notebook files (the library modules beside it import nothing from here).

    python -m tools.cli set-repo OWNER/NAME   # point badges, setup cells and pyproject at a fork
    python -m tools.cli sync-results          # rewrite results/<gpu>.csv from the stored outputs
    python -m tools.cli pins                  # rewrite constraints.txt from the notebooks' stamps
"""
from __future__ import annotations

import argparse
import sys

from .fork import set_repository
from .notebooks import ROOT
from .results_csv import sync_results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    repo = sub.add_parser("set-repo", help="point badges, setup cells and pyproject.toml at OWNER/NAME")
    repo.add_argument("slug", metavar="OWNER/NAME")
    sub.add_parser("sync-results", help="rewrite results/<gpu>.csv from the stored notebook outputs")
    sub.add_parser("pins", help="rewrite constraints.txt (the stored run's versions) from the notebooks' stamps")
    args = parser.parse_args(argv)
    if args.command == "set-repo":
        for path in set_repository(args.slug):
            print(f"updated {path.relative_to(ROOT)}")
        print(f"everything now points at https://github.com/{args.slug}")
    elif args.command == "pins":
        from .pins import write_pins

        line = write_pins()
        print(line)
        return 0 if "not written" not in line else 1
    else:
        for path in sync_results():
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
