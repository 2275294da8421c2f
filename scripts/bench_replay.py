"""`gsg bench replay` for a source checkout: `python scripts/bench_replay.py --help`."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["bench", "replay", *sys.argv[1:]])
