"""`gsg trace` for a source checkout: `python scripts/trace.py --help` (the logic lives in the package)."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["trace", *sys.argv[1:]])
