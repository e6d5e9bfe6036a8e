"""The published JSON Schema (built from specserve/profile/fields.py), and schema errors turned
into field / problem / fix issues."""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from specserve.profile.algorithms import NO_SPECULATION, REFUSED_ALGORITHMS, SPECULATIVE_ALGORITHMS
from specserve.profile.fields import build_schema
from specserve.profile.issues import Issue, error


@cache
def profile_schema() -> dict[str, Any]:
    """The JSON Schema, built from the field table; schema.json is its committed copy for the
    chart and editors (a drift test keeps the two equal)."""
    return build_schema()


def _field_path(err: ValidationError) -> str:
    parts = [str(p) for p in err.absolute_path]
    return ".".join(parts) if parts else "(profile)"


def _fix_for(err: ValidationError, field: str) -> str:
    schema = err.schema if isinstance(err.schema, dict) else {}
    validator = err.validator
    if validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        if allowed:
            return f"remove it, or use one of: {', '.join(allowed)}"
        return "remove it"
    if validator == "required":
        return "add the missing key (see docs/profile.md)"
    if validator == "enum" and field == "drafter.algorithm":
        return (
            f"use one of: {', '.join(SPECULATIVE_ALGORITHMS)} (or the same in lower case), "
            f"or {NO_SPECULATION} for no speculation"
        )
    if validator == "enum":
        return "use one of: " + ", ".join(str(v) for v in schema.get("enum", []))
    if validator == "const":
        return f"set it to {schema.get('const')!r}"
    if validator == "type":
        return f"give a value of type {schema.get('type')}"
    if validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        bounds = {
            k: schema[k]
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            if k in schema
        }
        return f"use a value within {bounds}"
    if validator == "oneOf" and field.endswith("api_key"):
        return "use {file: /run/secrets/api-key} or {env: SPECSERVE_API_KEY}; never the key itself"
    if validator == "pattern":
        return f"match the pattern {schema.get('pattern')}"
    if validator == "propertyNames":
        return "rename the key (see docs/profile.md for allowed names)"
    return "see docs/profile.md for the allowed values"


def _problem_for(err: ValidationError) -> str:
    if (
        err.validator == "enum"
        and _field_path(err) == "drafter.algorithm"
        and isinstance(err.instance, str)
        and err.instance.upper() in SPECULATIVE_ALGORITHMS
    ):
        return f"{err.instance!r} mixes cases; write it {err.instance.upper()}"
    if (
        err.validator == "enum"
        and _field_path(err) == "drafter.algorithm"
        and isinstance(err.instance, str)
        and err.instance.upper() in REFUSED_ALGORITHMS
    ):
        return (
            f"{err.instance!r} is an SGLang algorithm this profile does not take: "
            f"{REFUSED_ALGORITHMS[err.instance.upper()]}"
        )
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are not allowed ", "unknown key ")
    if err.validator == "oneOf":
        return f"{err.instance!r} matches none of the allowed forms"
    return err.message


def schema_issues(document: Any) -> list[Issue]:
    """All schema violations of `document`, each naming its field path, ordered by path."""
    validator = Draft202012Validator(profile_schema())
    found: list[Issue] = []
    for err in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path))):
        field = _field_path(err)
        if field.endswith("server.api_key") and isinstance(err.instance, str):
            found.append(
                error(
                    field,
                    "the API key is written into the profile as a literal",
                    "store it in a secret and reference it: api_key: {file: /run/secrets/api-key} "
                    "or api_key: {env: SPECSERVE_API_KEY}",
                )
            )
            continue
        found.append(error(field, _problem_for(err), _fix_for(err, field)))
    return found
