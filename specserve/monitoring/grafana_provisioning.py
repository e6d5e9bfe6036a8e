"""Grafana datasource and dashboard-provider provisioning files (apiVersion 1)."""

from __future__ import annotations

from typing import Any

from specserve.monitoring.grafana_alerting import DATASOURCE_UID_REF, FOLDER

DASHBOARDS_PATH = "/var/lib/grafana/dashboards/specserve"
PROMETHEUS_URL = "http://127.0.0.1:9090"


def datasource_provisioning() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus (specserve)",
                "type": "prometheus",
                # The alert rules reference the same variable: one value, set in Grafana's
                # environment, ties them together without writing a UID into any file.
                "uid": DATASOURCE_UID_REF,
                "access": "proxy",
                "url": PROMETHEUS_URL,
                "isDefault": False,
                "editable": False,
                "jsonData": {"timeInterval": "15s"},
            }
        ],
    }


def dashboard_provider() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "specserve",
                "orgId": 1,
                "folder": FOLDER,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": DASHBOARDS_PATH, "foldersFromFilesStructure": False},
            }
        ],
    }
