"""Prometheus exporter for SGLang speculative-decoding log lines."""
