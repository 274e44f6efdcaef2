#!/usr/bin/env bash
# Shared by the Python drivers' setup scripts:
#   setup-venv.sh FAMILY REQUIREMENTS_TXT VERSION_CODE
# Installs the pinned requirements into a venv kept in the machine-wide cache
# (../common-sh/machine-cache.sh), keyed by the pin and the interpreter, and points
# .cache/conformance/FAMILY/venv at it. VERSION_CODE is Python run in the venv to print the
# client's version for the `ready` line. Idempotent; a venv built by another clone is reused.
set -euo pipefail
FAMILY=$1 REQ=$2 VERSION_CODE=$3
COMMON="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$COMMON/../../.." && pwd)"
# shellcheck source=../common-sh/machine-cache.sh
source "$COMMON/../common-sh/machine-cache.sh"
CACHE="$ROOT/.cache/conformance/$FAMILY"
PIN="$(grep -v '^#' "$REQ" | tr -d '[:space:]')"
# Debian's python3 makes venvs only with python3-venv (ensurepip); else the PATH's python3 (pyenv).
PY=/usr/bin/python3
if [[ ! -x "$PY" ]] || ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  PY="$(command -v python3)"
fi
PYID="py$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')-$(readlink -f "$PY" | sha256sum | cut -c1-8)"
# The pinned versions (e.g. 2.16.1), else the requirements file's digest.
VERSIONS="$(grep -v '^#' "$REQ" | sed -n 's/.*==//p' | sed 's/[[:space:]]//g' | paste -sd+)"
[[ -n "$VERSIONS" ]] || VERSIONS="req$(sha256sum "$REQ" | cut -c1-12)"
ENTRY="$(mc_root "$ROOT/.cache/conformance/machine")/$(mc_key "$FAMILY" "$VERSIONS" "$PYID")"

build_venv() {
  local dir=$1
  "$PY" -m venv "$dir/venv" >&2
  "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ" >&2
}
mc_ensure "$ENTRY" build_venv
mkdir -p "$CACHE"
mc_link "$ENTRY/venv" "$CACHE/venv"
echo "$PIN" > "$CACHE/stamp"
VER="$("$CACHE/venv/bin/python" -c "$VERSION_CODE")"
echo "[conformance] $FAMILY $VER: ready"
