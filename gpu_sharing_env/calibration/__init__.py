"""Calibration of the speed model against third-party measurements: :mod:`.fit` (the speed
model, per dataset) and :mod:`.sharing` (the sharing coefficients)."""
