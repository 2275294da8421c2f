"""`gsg reproduce` for a source checkout: `python scripts/reproduce.py --help` (the logic lives in the package)."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["reproduce", *sys.argv[1:]])
