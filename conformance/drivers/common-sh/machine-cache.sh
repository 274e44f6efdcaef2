# Sourced by the drivers' setup scripts: a machine-wide cache of expensive installs (a venv, a
# native npm build), shared by every clone of the repository on this machine, so that a fresh
# clone (CI's) links to what another clone already built instead of building it again.
#
#   ${KPROXY_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kproxy-conformance}/<family>-<key>/
#
# <key> names the exact versions the entry was built from (package pin or lock-file digest,
# interpreter/runtime ABI); an entry is never changed once complete (a `.complete` file, written
# last), so a new version gets a new entry. Builds hold a lock (flock), so concurrent setups of
# several clones build once and the others wait. When the machine-wide folder cannot be created
# (e.g. a read-only HOME), the entry lives in the clone's own .cache instead.
# KPROXY_CONFORMANCE_CACHE=off keeps every entry in the clone (the behaviour before this cache).

# mc_root LOCAL_FALLBACK: prints the folder that holds the entries.
mc_root() {
  local fallback=$1 base
  if [[ "${KPROXY_CONFORMANCE_CACHE:-}" == off ]]; then
    base=$fallback
  else
    if [[ -n "${KPROXY_CONFORMANCE_CACHE:-}" ]]; then base=$KPROXY_CONFORMANCE_CACHE
    elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then base=$XDG_CACHE_HOME/kproxy-conformance
    elif [[ -n "${HOME:-}" ]]; then base=$HOME/.cache/kproxy-conformance
    else base=$fallback
    fi
    mkdir -p "$base" 2>/dev/null && [[ -w "$base" ]] || base=$fallback
  fi
  mkdir -p "$base"
  (cd "$base" && pwd)
}

# mc_key TEXT...: the words joined by '-', anything but [A-Za-z0-9._+-] turned into '_'.
mc_key() {
  local IFS=-
  printf '%s' "$*" | tr -c 'A-Za-z0-9._+-' '_'
}

# mc_ensure DIR BUILD_FUNCTION [ARGS...]: unless DIR/.complete exists, (re)creates DIR empty and
# runs BUILD_FUNCTION DIR ARGS... under DIR's lock, then writes DIR/.complete. Prints what it
# does to stderr. Returns BUILD_FUNCTION's failure (DIR stays incomplete, the next run retries).
mc_ensure() {
  local dir=$1 build=$2
  shift 2
  [[ -f "$dir/.complete" ]] && return 0
  mkdir -p "$(dirname "$dir")"
  (
    exec 7>"$dir.lock"
    flock 7
    [[ -f "$dir/.complete" ]] && exit 0   # another setup built it while this one waited
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "[machine-cache] building $dir" >&2
    "$build" "$dir" "$@"
    date -u +%FT%TZ > "$dir/.complete"
  )
}

# mc_link TARGET LINK: makes LINK a symbolic link to TARGET (replacing whatever LINK was).
mc_link() {
  local target=$1 link=$2
  [[ -L "$link" && "$(readlink "$link")" == "$target" ]] && return 0
  rm -rf "$link"
  mkdir -p "$(dirname "$link")"
  ln -s "$target" "$link"
}
