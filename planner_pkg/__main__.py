"""``python -m planner_pkg <command>``: see :mod:`planner_pkg.cli`."""
import sys

from planner_pkg.cli import main

if __name__ == "__main__":
    sys.exit(main())
