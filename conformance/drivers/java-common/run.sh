#!/usr/bin/env bash
# Shared by java-4.4/run and java-3.x/run:  run.sh FAMILY CLASSPATH SETUP_SCRIPT -- DRIVER ARGS...
# FAMILY may name a version-pinned variant, FAMILY@VERSION: its classes are its own, the account's
# client is FAMILY. Runs the conformance driver compiled for FAMILY (running SETUP_SCRIPT first, output to stderr,
# if its classes are missing). stdout: progress lines, then the account JSON as the last line.
set -euo pipefail
family=$1; cp=$2; setup=$3; shift 4
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
classes=$root/.cache/conformance/$family/classes
# .cache may be shared by several clones: setup recompiles when the classes were built from
# another source (a digest check, quick when nothing changed).
"$setup" >&2
[[ -z "${CONFORMANCE_CHECK_SETUP:-}" ]] || exit 0   # the runner's preflight: set up, nothing run
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dlog4j2.configurationFile="$root/conformance/drivers/java-common/log4j2.properties" \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile=System.err \
    -Dconformance.family="${family%%@*}" -cp "$cp:$classes" ConformanceDriver "$@"
