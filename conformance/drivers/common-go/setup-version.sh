#!/usr/bin/env bash
# Shared by the Go drivers' setup scripts when CONFORMANCE_CLIENT_VERSION is set (a version-pinned
# variant of the family, conformance/README.md "Client versions"):
#   setup-version.sh FAMILY MODULE DRIVER_DIR VERSION
# Copies the driver's source to .cache/conformance/FAMILY@VERSION/src, pins MODULE at VERSION there
# (`go get MODULE@VERSION` through the Go module proxy, then `go mod tidy`) and builds
# .cache/conformance/FAMILY@VERSION/driver. Idempotent: rebuilt only when the driver's source is
# newer than that binary. The family's own go.mod/go.sum are not changed.
set -euo pipefail
FAMILY=$1 MODULE=$2 HERE=$3 VERSION=$4
ROOT="$(cd "$HERE/../../.." && pwd)"
[[ $VERSION == v* ]] || VERSION="v$VERSION"
DIR="$ROOT/.cache/conformance/$FAMILY@$VERSION"
OUT="$DIR/driver"
mkdir -p "$DIR"
exec 9>"$DIR/.build.lock"; flock 9
if [[ ! -x "$OUT" ]] || [[ -n "$(find "$HERE" "$HERE/../common-go" \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$OUT")" ]]; then
  rm -rf "$DIR/src"; mkdir -p "$DIR/src"
  cp "$HERE"/*.go "$HERE/go.mod" "$HERE/go.sum" "$DIR/src/"
  (
    cd "$DIR/src"
    go mod edit -replace "kproxy/conformance/drivers/common-go/contract=$HERE/../common-go/contract"
    go get "$MODULE@$VERSION"
    go mod tidy
    go build -trimpath -o "$OUT.tmp" . && mv "$OUT.tmp" "$OUT"
  ) >&2
fi
VER="$(cd "$DIR/src" && go list -m -f '{{.Version}}' "$MODULE")"
[[ $VER == "$VERSION" ]] || { echo "$FAMILY: wanted $MODULE $VERSION, the build has $VER" >&2; exit 1; }
echo "[conformance] $FAMILY $VER: ready"
