#!/usr/bin/env bash
# Installs what `make kube` and the cluster e2e test need on top of `make deps`, and only what is
# missing: containerd, runc, the CNI plugins, iptables and conntrack from apt; kubelet,
# kube-controller-manager, kube-scheduler and kube-proxy built from the Go module proxy (through
# hack/tools, like kube-apiserver), CoreDNS built from the Go module proxy, and the pause
# container built from the C source that ships in the k8s.io/kubernetes module. All of it goes
# into the cache beside the control plane (~/.cache/regent), so that a fresh clone reuses it.
set -euo pipefail

K8S_VERSION=v1.37.2
COREDNS_VERSION=v1.14.6 # the version k8s.io/kubernetes v1.37.2 pins (build/dependencies.yaml)
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${REGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regent}
node_dir=$cache/kube-node-$K8S_VERSION

log() { echo "kube-deps: $*" >&2; }
# shellcheck source=hack/cache-lock.sh
. "$root/hack/cache-lock.sh"
lock_cache "make kube-deps"

missing=()
for pkg in containerd:containerd runc:runc iptables:iptables conntrack:conntrack; do
  command -v "${pkg%%:*}" >/dev/null || missing+=("${pkg#*:}")
done
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v gcc >/dev/null || missing+=(gcc)
if [ ${#missing[@]} -gt 0 ]; then
  announce "installing ${missing[*]} with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null 9>&-
  # Debian's containerd package starts a daemon of its own; the cluster runs its own instance,
  # with its own socket and state.
  service containerd stop >/dev/null 2>&1 || true
fi

bins=(kubelet kube-controller-manager kube-scheduler kube-proxy)
need=0
for b in "${bins[@]}" coredns pause; do [ -x "$node_dir/$b" ] || need=1; done
if [ $need = 1 ]; then
  mkdir -p "$node_dir.tmp"
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=37 -X $p.gitTreeState=clean"
  done
  pkgs=()
  for b in "${bins[@]}"; do [ -x "$node_dir/$b" ] || pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  if [ ${#pkgs[@]} -gt 0 ]; then
    announce "building ${pkgs[*]} $K8S_VERSION into $node_dir (a few minutes, once)"
    (cd "$root/hack/tools" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$node_dir.tmp" \
      go install -trimpath -ldflags "$ldf" "${pkgs[@]}")
  fi
  if [ ! -x "$node_dir/coredns" ]; then
    announce "building coredns $COREDNS_VERSION"
    CGO_ENABLED=0 GOBIN="$node_dir.tmp" go install -trimpath -ldflags "-s -w" \
      "github.com/coredns/coredns@$COREDNS_VERSION"
  fi
  if [ ! -x "$node_dir/pause" ]; then
    announce "building the pause container from k8s.io/kubernetes $K8S_VERSION's build/pause"
    src=$(cd "$root/hack/tools" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)
    gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION" -o "$node_dir.tmp/pause" "$src/build/pause/linux/pause.c"
  fi
  mkdir -p "$node_dir"
  for f in "$node_dir.tmp"/*; do [ -e "$f" ] && mv "$f" "$node_dir/"; done
  rmdir "$node_dir.tmp"
fi
