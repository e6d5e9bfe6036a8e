"""Validate rendered objects against the Kubernetes API schemas and the Prometheus Operator CRDs.

Kubernetes kinds use kubernetes-validate's bundled "strict" JSON schemas (unknown fields are
errors, as with the API server's strict field validation); the validators are built once per
(version, kind) because each build reads the large _definitions.json. CRD kinds use the
openAPIV3Schema files in crd-schemas/ (SOURCE.md), made strict the same way.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

CRD_DIR = Path(__file__).resolve().parent / "crd-schemas"
KUBERNETES_VERSIONS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
CRD_GROUPS = ("monitoring.coreos.com", "leaderworkerset.x-k8s.io", "keda.sh")


class SchemaMissing(LookupError):
    """No schema for this kind: a test must fail rather than let the object pass unchecked."""


def _schema_dir(version: str) -> Any:
    root = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema")
    return root.joinpath(f"v{version}.0-local-strict")


def _api_file_part(api_version: str) -> str:
    # rbac.authorization.k8s.io/v1 -> rbac-v1 ; v1 -> v1 (kubernetes-validate's file naming)
    return re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)


@cache
def _definitions(version: str) -> Resource[Any]:
    text = _schema_dir(version).joinpath("_definitions.json").read_text(encoding="utf-8")
    return Resource.from_contents(json.loads(text))


@cache
def kubernetes_validator(version: str, kind: str, api_version: str) -> jsonschema.Validator:
    name = f"{kind.lower()}-{_api_file_part(api_version)}.json"
    path = _schema_dir(version).joinpath(name)
    if not path.is_file():
        raise SchemaMissing(f"no Kubernetes {version} schema for {api_version} {kind} ({name})")
    schema = json.loads(path.read_text(encoding="utf-8"))
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = _definitions(version) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _strict(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _strict(v) for k, v in node.items()}
        if (
            node.get("type") == "object"
            and "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


@cache
def crd_validator(kind: str, api_version: str) -> jsonschema.Validator:
    group, _, version = api_version.partition("/")
    path = CRD_DIR / f"{kind.lower()}-{group}-{version}.json"
    if not path.is_file():
        raise SchemaMissing(f"no CRD schema for {api_version} {kind} in {CRD_DIR}")
    schema = _strict(json.loads(path.read_text(encoding="utf-8")))
    # The API server validates metadata itself; the CRD schema only declares it an object.
    schema = copy.deepcopy(schema)
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def is_crd(doc: dict[str, Any]) -> bool:
    return str(doc.get("apiVersion", "")).split("/")[0] in CRD_GROUPS


def errors(doc: dict[str, Any], version: str) -> list[str]:
    """Every schema error of `doc` for Kubernetes `version` (CRDs: the one CRD version)."""
    kind, api_version = doc["kind"], doc["apiVersion"]
    validator = (
        crd_validator(kind, api_version) if is_crd(doc)
        else kubernetes_validator(version, kind, api_version)
    )  # fmt: skip
    return [
        f"{kind}/{doc['metadata']['name']} at {'.'.join(map(str, e.absolute_path)) or '(root)'}: "
        f"{e.message}"
        for e in validator.iter_errors(doc)
    ]
