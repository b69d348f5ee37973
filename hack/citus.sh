#!/usr/bin/env bash
# Builds Citus (distributed PostgreSQL) into the installed PostgreSQL 15 when citus.so is
# missing from its lib directory. Neither Debian bookworm nor any reachable registry ships it, so
# it comes from the source tarball in the shared vendor directory (../shared/vendor beside the
# checkout, as CI lays it out; CITUS_TARBALL overrides), after checking its sha256, with the
# patches in hack/citus/ applied (each says why). A stamp beside citus.so names the tarball and
# the patches it was built from, so a build from other sources is replaced once.
#
# hack/deps.sh runs it inside the cache lock, with CITUS_LOCKED=1 (apt's own lock makes a second
# apt-get fail rather than wait); run alone, it takes that lock itself, so a second run waits.
set -euo pipefail

CITUS_VERSION=13.2.2
CITUS_SHA256=d362ac18ee258a59a4a5d983bb9b28d4d75c641c68f64cb21628a9944062bc01
root=$(cd "$(dirname "$0")/.." && pwd)
tarball=${CITUS_TARBALL:-$root/../shared/vendor/citus-$CITUS_VERSION.tar.gz}

pg_libdir() {
  local d
  d=$(pg_config --pkglibdir 2>/dev/null) && [ -n "$d" ] && [ -d "$d" ] && { echo "$d"; return 0; }
  echo /usr/lib/postgresql/15/lib
}

patches=("$root"/hack/citus/*.patch)
stamp() { echo "$CITUS_VERSION $CITUS_SHA256 $(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)"; }
built() { [ -f "$(pg_libdir)/citus.so" ] && [ "$(cat "$(pg_libdir)/citus.regent-stamp" 2>/dev/null)" = "$(stamp)" ]; }

# The warm path: two file reads.
built && exit 0

cache=${REGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regent}
log() { echo "citus: $*" >&2; }
# shellcheck source=hack/cache-lock.sh
. "$root/hack/cache-lock.sh"
if [ "${CITUS_LOCKED:-}" != 1 ]; then
  lock_cache "hack/citus.sh"
  # The run that held the lock before us may have built it.
  built && exit 0
fi

[ -f "$tarball" ] || { log "$tarball is missing (set CITUS_TARBALL to the Citus $CITUS_VERSION source tarball)"; exit 1; }
echo "$CITUS_SHA256  $tarball" | sha256sum -c --quiet - ||
  { log "$tarball does not have the sha256 $CITUS_SHA256; refusing to build it"; exit 1; }

# postgresql-server-dev-15 is pinned to the installed server's exact version, and the server with
# it: left unpinned, apt takes the newest server-dev, and the newest server with it, under the
# running clusters.
server=$(dpkg-query -W -f='${Version}' postgresql-15)
pkgs=(libkrb5-dev liblz4-dev libzstd-dev patch)
[ "$(dpkg-query -W -f='${Status}' postgresql-server-dev-15 2>/dev/null)" = "install ok installed" ] ||
  pkgs+=("postgresql-server-dev-15=$server" "postgresql-15=$server")
announce "installing ${pkgs[*]} with apt, then building Citus $CITUS_VERSION (several minutes, once)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${pkgs[@]}" >/dev/null 9>&-
[ "$(dpkg-query -W -f='${Version}' postgresql-15)" = "$server" ] ||
  { log "apt changed postgresql-15 from $server; stopping"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp"
src=$tmp/citus-$CITUS_VERSION
for p in "${patches[@]}"; do patch -s -p1 -d "$src" <"$p"; done
# Regent needs neither Citus's libcurl statistics collector nor LLVM bitcode for JIT.
(cd "$src" && ./configure --without-libcurl >/dev/null &&
  make -s -j"$(nproc)" with_llvm=no >/dev/null && make -s with_llvm=no install >/dev/null)
[ -f "$(pg_libdir)/citus.so" ] || { log "the build installed no citus.so into $(pg_libdir)"; exit 1; }
stamp >"$(pg_libdir)/citus.regent-stamp"
announce "Citus $CITUS_VERSION (with ${#patches[@]} patch(es) from hack/citus) is installed in $(pg_libdir)"
