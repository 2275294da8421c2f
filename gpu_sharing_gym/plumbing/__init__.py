"""What every command line of the project shares, below the baselines and the agents (they use
it too) and above the core (which never does): the shared argument parser with one-line errors
(``cli_args``), clean Ctrl-C/SIGTERM for pools and loops (``interrupt``), progress bars or plain
lines with a per-policy ETA (``progress``), atomic file writes (``fileio``)."""
