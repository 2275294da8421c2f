"""The event-driven simulator: engine, events, online services, faults, snapshots."""
