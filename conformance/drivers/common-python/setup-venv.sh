#!/usr/bin/env bash
# Shared by the Python drivers' setup scripts:
#   setup-venv.sh FAMILY REQUIREMENTS_TXT VERSION_CODE
# Installs the pinned requirements into a venv kept in the machine-wide cache
# (../common-sh/machine-cache.sh), keyed by the pin and the interpreter, and points
# .cache/conformance/FAMILY/venv at it. VERSION_CODE is Python run in the venv to print the
# client's version for the `ready` line. Idempotent; a venv built by another clone is reused.
#
# CONFORMANCE_CLIENT_VERSION=V (a version-pinned variant, conformance/README.md "Client versions"):
# the requirements file's package at V instead, in .cache/conformance/FAMILY@V/venv. An old
# release may have no wheel for the default interpreter (confluent-kafka 1.x has none for 3.11):
# then the first of pyenv's 3.10, 3.9 and 3.8 for which pip finds a wheel of it is used
# (--only-binary for that package; `pip download` decides, nothing is compiled).
set -euo pipefail
FAMILY=$1 REQ=$2 VERSION_CODE=$3
PINNED=${CONFORMANCE_CLIENT_VERSION:-}
COMMON="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$COMMON/../../.." && pwd)"
# shellcheck source=../common-sh/machine-cache.sh
source "$COMMON/../common-sh/machine-cache.sh"
CACHE="$ROOT/.cache/conformance/$FAMILY${PINNED:+@$PINNED}"
if [[ -n $PINNED ]]; then
  PKG="$(grep -v '^#' "$REQ" | sed -n 's/[[:space:]]*==.*//p' | head -1)"
  REQ="$(mktemp)"; trap 'rm -f "$REQ"' EXIT
  echo "$PKG==$PINNED" > "$REQ"
fi
PIN="$(grep -v '^#' "$REQ" | tr -d '[:space:]')"
# Debian's python3 makes venvs only with python3-venv (ensurepip); else the PATH's python3 (pyenv).
PY=/usr/bin/python3
if [[ ! -x "$PY" ]] || ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  PY="$(command -v python3)"
fi
if [[ -n $PINNED ]]; then
  has_wheel() {  # has_wheel PYTHON: pip finds a wheel of the pin for that interpreter
    local d; d="$(mktemp -d)"
    "$1" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: -d "$d" "$PIN" >/dev/null 2>&1
    local rc=$?; rm -rf "$d"; return $rc
  }
  if ! has_wheel "$PY"; then
    found=
    for v in 3.10 3.9 3.8; do
      for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/python3; do
        [[ -x $cand ]] || continue
        if has_wheel "$cand"; then PY=$cand; found=1; break 2; fi
      done
    done
    [[ -n $found ]] || { echo "$FAMILY: no wheel of $PIN for $PY nor for pyenv's 3.10/3.9/3.8" >&2; exit 1; }
  fi
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
