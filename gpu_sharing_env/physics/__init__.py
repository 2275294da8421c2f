"""Physics: the hardware (GPU datasheets, nodes), the sharing modes, the model zoo and the
calibrated speed and interference model (``MODEL_VERSION``)."""
