"""`gsg evaluate` for a source checkout: `python scripts/evaluate.py --help` (the logic lives in the package)."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["evaluate", *sys.argv[1:]])
