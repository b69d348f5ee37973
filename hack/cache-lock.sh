# Sourced by hack/deps.sh and hack/kube-deps.sh, which define $cache and log().
#
# Two runs at once (a user's `make deps`, and one that `make manifests` started) built into the
# same temporary directories of the cache and moved them from under each other. So a run holds a
# lock on the cache, flock(1) on $cache/lock, from start to end: apt's own lock makes a second
# apt-get fail rather than wait, so the apt step needs it as much as the builds do, and a warm run
# holds it only for its checks. A second run waits, saying for whom and for what, then finds the
# work done. The lock file's lines say who holds it and what that run is doing.

# lock_cache NAME takes the lock for the run NAME ("make deps"), held on fd 9 until the script
# exits. Whatever the run starts inherits fd 9: a command that may leave a daemon behind (apt-get
# install, whose packages start their services) runs with 9>&-, or the lock would outlive the run.
lock_cache() {
  mkdir -p "$cache"
  exec 9>>"$cache/lock"
  if ! flock -n 9; then
    local who what
    who=$(head -n 1 "$cache/lock")
    what=$(awk 'NR > 1 { printf "%s%s", (NR > 2 ? "; " : ""), $0 }' "$cache/lock")
    log "waiting for another ${who:-make deps or make kube-deps} to finish${what:+: $what}"
    flock 9
    log "the other run is done; going on"
  fi
  printf '%s (pid %d)\n' "$1" "$$" >"$cache/lock"
}

# announce WHAT logs that the run is doing WHAT, and tells a run that waits for the lock.
announce() {
  log "$*"
  printf '%s\n' "$*" >>"$cache/lock"
}
