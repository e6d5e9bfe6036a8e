"""`value | specserve_redact(secrets)`: every form of every secret replaced by `<redacted>`.

By value, not by field name: SGLang's /server_info carries the API key in `api_key` and again
inside `launch_command`. Secrets that /server_info itself reveals (secret-named fields, values
of secret flags in the launch command) are added to the ones given. Uses specserve.secrets, the
same code as the launcher's log tee and bench.
"""

from __future__ import annotations

from typing import Any

from specserve.secrets import Redactor, secrets_in_server_info


def specserve_redact(value: Any, secrets: list[str] | str | None = None) -> Any:
    given = [secrets] if isinstance(secrets, str) else list(secrets or [])
    found = secrets_in_server_info(value) if isinstance(value, dict) else []
    return Redactor([str(s) for s in given if s] + found).redact_value(value)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"specserve_redact": specserve_redact}
