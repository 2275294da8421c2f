"""`gsg bench markdown` for a source checkout: `python scripts/make_benchmarks_md.py --help`."""

import sys

from gpu_sharing_gym.cli import entry

if __name__ == "__main__":
    entry(["bench", "markdown", *sys.argv[1:]])
