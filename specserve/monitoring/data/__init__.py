"""The pinned dcgm-exporter's default counters file (specserve.monitoring.dcgm)."""
