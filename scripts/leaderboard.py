"""`gsg leaderboard` for a source checkout: `python scripts/leaderboard.py --help` (the logic lives in the package)."""

import sys

from gpu_sharing_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["leaderboard", *sys.argv[1:]]))
