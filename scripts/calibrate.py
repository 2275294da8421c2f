"""`gsg calibrate` for a source checkout: `python scripts/calibrate.py --help` (the logic lives in the package)."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["calibrate", *sys.argv[1:]])
