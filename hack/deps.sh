#!/usr/bin/env bash
# Installs what `make test` and `make run` need, and only what is missing:
# PostgreSQL, podman, buildah and runc from apt, and kube-apiserver, etcd, kubectl, helm and controller-gen
# built from the Go module proxy into a cache outside the checkout (CI runs in a
# fresh clone, so the cache is what keeps a warm run from rebuilding the control plane).
set -euo pipefail

K8S_VERSION=v1.37.2
HELM_VERSION=v3.22.0
CONTROLLER_GEN_VERSION=v0.23.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${REGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regent}
k8s_dir=$cache/k8s-$K8S_VERSION
tools_dir=$cache/tools

log() { echo "deps: $*" >&2; }

pg_bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

if ! pg_bindir >/dev/null; then
  log "installing PostgreSQL with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  # Debian's package starts a cluster of its own; the tests and `make run` run theirs.
  service postgresql stop >/dev/null 2>&1 || true
fi

# The image test (test/chart/containers) builds the images with podman (or buildah) and runs
# them as root through runc, the OCI runtime it names; the CA bundle goes into the images.
# The console's browser tests (broker/console) drive Debian's chromium.
missing=()
for tool in podman buildah runc chromium; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$k8s_dir/kube-apiserver" ] || [ ! -x "$k8s_dir/etcd" ] || [ ! -x "$k8s_dir/kubectl" ]; then
  log "building kube-apiserver, etcd and kubectl $K8S_VERSION into $k8s_dir (a few minutes, once)"
  mkdir -p "$k8s_dir.tmp"
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
  done
  (cd "$root/hack/tools" && GOFLAGS=-mod=mod GOBIN="$k8s_dir.tmp" go install -trimpath -ldflags "$ldf" tool)
  mv "$k8s_dir.tmp/server" "$k8s_dir.tmp/etcd"
  rm -rf "$k8s_dir"
  mv "$k8s_dir.tmp" "$k8s_dir"
fi

if [ ! -x "$tools_dir/helm-$HELM_VERSION" ]; then
  log "building helm $HELM_VERSION"
  tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mkdir -p "$tools_dir"
  mv "$tmp/helm" "$tools_dir/helm-$HELM_VERSION"
  rm -rf "$tmp"
fi
ln -sfn "helm-$HELM_VERSION" "$tools_dir/helm"

if [ ! -x "$tools_dir/controller-gen-$CONTROLLER_GEN_VERSION" ]; then
  log "building controller-gen $CONTROLLER_GEN_VERSION"
  tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
  mkdir -p "$tools_dir"
  mv "$tmp/controller-gen" "$tools_dir/controller-gen-$CONTROLLER_GEN_VERSION"
  rm -rf "$tmp"
fi
ln -sfn "controller-gen-$CONTROLLER_GEN_VERSION" "$tools_dir/controller-gen"
