"""Alerting and dashboards for the specserve exporter: one rule source, rendered for every consumer.

`rules` holds the alert and recording-rule definitions; the other modules render them for
Prometheus, the Helm chart's PrometheusRule, Grafana-managed alerting and the Grafana dashboard.
`specserve generate` (specserve/generate/command.py) rewrites every committed artefact under
`monitoring/`.
"""
