#!/usr/bin/env bash
# Shared by java-4.4/setup, java-3.x/setup and conformance/verifier/setup:
#   build.sh FAMILY CLASSPATH SOURCE...
# compiles SOURCE... with the JDK's javac against CLASSPATH into .cache/conformance/FAMILY/classes,
# unless the classes there were compiled from these exact sources and classpath (digest stamp).
set -euo pipefail
family=$1; cp=$2; shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=$root/.cache/conformance/$family/classes
mkdir -p "$(dirname "$out")"
exec 9>"$(dirname "$out")/.build.lock"; flock 9   # concurrent setups: one compiles, the others wait
want=$( { printf '%s\n' "$cp"; for s in "$@"; do printf '%s\n' "$s"; cat "$s"; done; } | sha256sum | cut -d' ' -f1)
if [[ -f $out/.stamp && $(cat "$out/.stamp") == "$want" ]]; then exit 0; fi
tmp=$(mktemp -d "$root/.cache/conformance/$family/classes.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -encoding UTF-8 -Xlint:all,-options -d "$tmp" -cp "$cp" "$@" >&2
echo "$want" > "$tmp/.stamp"
rm -rf "$out.old"; [[ -d $out ]] && mv "$out" "$out.old"
mv "$tmp" "$out"; rm -rf "$out.old"
trap - EXIT
