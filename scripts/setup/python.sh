#!/usr/bin/env bash
# The project's virtual environment: the distribution (editable) with its exact pins and the
# test tools. constraints.txt pins every transitive package too.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "Python >= 3.11 is required (found $("$PYTHON" --version))" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip==25.3"
extras="${SPECSERVE_EXTRAS:-bench,deploy}"
.venv/bin/python -m pip install -q -c constraints.txt -e ".[${extras}]"
