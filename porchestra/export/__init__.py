"""Exporters from the event log: ATIF trajectories (atif.py) and OpenTelemetry GenAI spans (otel.py)."""
