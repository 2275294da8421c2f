"""Evaluation: the metric schema (:mod:`.metrics`), the loop every policy runs through
(:mod:`.runner`) and the placement log and its chart (:mod:`.occupancy`)."""
