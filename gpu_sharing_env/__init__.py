"""gpu-sharing-gym: a Gymnasium environment simulating GPU sharing in heterogeneous clusters."""

__version__ = "0.1.0"
