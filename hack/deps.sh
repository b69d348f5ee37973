#!/usr/bin/env bash
# Installs what `make test` and `make run` need, and only what is missing:
# PostgreSQL, podman, buildah, runc, chromium and jq from apt, Citus built into that PostgreSQL
# from the shared vendor tarball (hack/citus.sh), kube-apiserver, etcd, kubectl, helm
# and controller-gen built from the Go module proxy into a cache outside the checkout (CI runs in
# a fresh clone, so the cache is what keeps a warm run from rebuilding the control plane), and the
# main module's dependencies. It links kubectl and helm into the checkout's bin/, beside what
# `make build` builds there, so that one PATH entry serves the README's tour.
#
# The steps are independent, so they run side by side: apt waits on the network and dpkg while
# the Go builds use the CPU, and the module downloads overlap the compiles.
set -euo pipefail

K8S_VERSION=v1.37.2
HELM_VERSION=v3.22.0
CONTROLLER_GEN_VERSION=v0.23.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${REGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regent}
k8s_dir=$cache/k8s-$K8S_VERSION
tools_dir=$cache/tools
k8s_minor=$(echo "$K8S_VERSION" | cut -d. -f2)
# Helm's default Kubernetes version (.Capabilities.KubeVersion, which the chart's kubeVersion
# constraint is checked against when no --kube-version is given) is set at link time, as helm's
# own Makefile does; without it, it is v1.20. The name carries it, so a helm built without it is
# rebuilt.
helm_bin=helm-$HELM_VERSION-kube1.$k8s_minor

log() { echo "deps: $*" >&2; }
# shellcheck source=hack/cache-lock.sh
. "$root/hack/cache-lock.sh"

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

# The image test (test/chart/containers) builds the images with podman (or buildah) and runs
# them as root through runc, the OCI runtime it names; the CA bundle goes into the images.
# The console's browser tests (broker/api/console) drive Debian's chromium; the README's tour reads
# JSON with jq.
install_apt_packages() {
  local missing=() tool
  pg_bindir >/dev/null || missing+=(postgresql)
  for tool in podman buildah runc chromium jq; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  [ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
  [ ${#missing[@]} -gt 0 ] || return 0
  announce "installing ${missing[*]} with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null 9>&-
  # Debian's package starts a cluster of its own; the tests and `make run` run theirs.
  if [[ " ${missing[*]} " == *" postgresql "* ]]; then
    service postgresql stop >/dev/null 2>&1 || true
  fi
}

# Citus builds against the installed server and installs apt packages of its own, so it follows
# the apt step; it runs under this run's lock.
build_citus() { CITUS_LOCKED=1 REGENT_CACHE="$cache" "$root/hack/citus.sh"; }
install_apt_packages_and_citus() { install_apt_packages && build_citus; }

build_control_plane() {
  [ -x "$k8s_dir/kube-apiserver" ] && [ -x "$k8s_dir/etcd" ] && [ -x "$k8s_dir/kubectl" ] && return 0
  announce "building kube-apiserver, etcd and kubectl $K8S_VERSION into $k8s_dir (a few minutes, once)"
  mkdir -p "$k8s_dir.tmp"
  local ldf="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor -X $p.gitTreeState=clean"
  done
  (cd "$root/hack/tools" && GOFLAGS=-mod=mod GOBIN="$k8s_dir.tmp" go install -trimpath -ldflags "$ldf" tool)
  mv "$k8s_dir.tmp/server" "$k8s_dir.tmp/etcd"
  rm -rf "$k8s_dir"
  mv "$k8s_dir.tmp" "$k8s_dir"
}

build_helm() {
  [ -x "$tools_dir/$helm_bin" ] && return 0
  announce "building helm $HELM_VERSION"
  local tmp v=helm.sh/helm/v3 ldf p
  tmp=$(mktemp -d)
  ldf="-s -w -X $v/internal/version.version=$HELM_VERSION"
  for p in chartutil lint/rules; do
    ldf="$ldf -X $v/pkg/$p.k8sVersionMajor=1 -X $v/pkg/$p.k8sVersionMinor=$k8s_minor"
  done
  GOBIN=$tmp go install -trimpath -ldflags "$ldf" "$v/cmd/helm@$HELM_VERSION"
  mkdir -p "$tools_dir"
  mv "$tmp/helm" "$tools_dir/$helm_bin"
  rm -rf "$tmp"
}

build_controller_gen() {
  [ -x "$tools_dir/controller-gen-$CONTROLLER_GEN_VERSION" ] && return 0
  announce "building controller-gen $CONTROLLER_GEN_VERSION"
  local tmp
  tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
  mkdir -p "$tools_dir"
  mv "$tmp/controller-gen" "$tools_dir/controller-gen-$CONTROLLER_GEN_VERSION"
  rm -rf "$tmp"
}

# The first `go build` or `go test` of the checkout then needs no network: a warm module cache
# makes this a no-op that reads nothing from the proxy.
download_modules() { (cd "$root" && go mod download); }

lock_cache "make deps"

# The Go steps fetch from the module proxy over HTTPS: without the CA bundle, apt goes first.
steps=(build_control_plane build_helm build_controller_gen download_modules)
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  steps=(install_apt_packages_and_citus "${steps[@]}")
else
  install_apt_packages
  steps=(build_citus "${steps[@]}")
fi
pids=() names=()
for step in "${steps[@]}"; do
  "$step" &
  pids+=($!) names+=("$step")
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  log "failed: ${failed[*]} (see the lines above)"
  exit 1
fi

ln -sfn "$helm_bin" "$tools_dir/helm"
ln -sfn "controller-gen-$CONTROLLER_GEN_VERSION" "$tools_dir/controller-gen"
mkdir -p "$root/bin"
ln -sfn "$k8s_dir/kubectl" "$root/bin/kubectl"
ln -sfn "$tools_dir/helm" "$root/bin/helm"
log "kubectl ($K8S_VERSION) and helm ($HELM_VERSION) are in bin/, beside Regent's binaries. The README's"
log "tour and the commands make run prints use them from there: run, in each shell,"
log "    export PATH=$root/bin:\$PATH"
