"""`gsg bench markdown` for a source checkout: `python scripts/make_benchmarks_md.py --help`."""

import sys

from gpu_sharing_gym.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "markdown", *sys.argv[1:]]))
