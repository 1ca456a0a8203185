#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kubectl) from the
# pinned Go modules under test/control-plane/ into a cache keyed by both go.sum files, this
# script and the Go version, so that a second run builds nothing (docs/testing.md, "The real
# control plane"). Prints the cache's bin directory on stdout; progress goes to stderr.
#
#   scripts/control-plane.sh          build if needed, print the bin directory
#   scripts/control-plane.sh --print  print the bin directory the current inputs name, build nothing
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kube="${top}/test/control-plane/kube"
etcd="${top}/test/control-plane/etcd"
# Go's own install places, for a shell whose PATH lacks them (a CI runner's, a sudo's).
for d in /usr/local/go/bin "${HOME}/go/bin" /usr/lib/go/bin; do
  command -v go >/dev/null || { [[ -x "$d/go" ]] && PATH="$d:$PATH"; }
done
command -v go >/dev/null || { echo "control-plane: go is not on PATH nor in /usr/local/go/bin (the test control plane is built with Go)" >&2; exit 1; }

# The release the binaries report as their version: the one go.mod pins.
kube_version=$(cd "$kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
key=$(cat "$kube/go.sum" "$etcd/go.sum" "${BASH_SOURCE[0]}" <(go version) | sha256sum | cut -c1-16)
cache="${AGENTD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentd}/control-plane/${kube_version}-${key}"
bin="${cache}/bin"

if [[ "${1:-}" == "--print" ]]; then echo "$bin"; exit 0; fi
if [[ -f "${cache}/complete" ]]; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
# One builder at a time per cache entry: a second caller waits, then finds it complete.
exec 9>"${cache}/.lock"
flock 9
if [[ -f "${cache}/complete" ]]; then echo "$bin"; exit 0; fi

tmp="${cache}/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
start=$(date +%s)
# kube-apiserver and friends embed their version through component-base's ldflags, as
# k8s.io/kubernetes's hack/lib/version.sh sets them; without it they report v0.0.0 and
# kubectl warns of a version skew.
ver="k8s.io/component-base/version"
ldflags="-s -w -X ${ver}.gitVersion=${kube_version} -X ${ver}.gitMajor=1 -X ${ver}.gitMinor=$(echo "$kube_version" | cut -d. -f2) -X ${ver}.gitTreeState=clean -X ${ver}.buildDate=1970-01-01T00:00:00Z"
ldflags="${ldflags} -X k8s.io/client-go/pkg/version.gitVersion=${kube_version}"
echo "== control plane: building kube-apiserver, kube-controller-manager and kubectl ${kube_version} (cold: about 10-20 minutes on 2 cores)" >&2
(cd "$kube" && go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
etcd_version=$(cd "$etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
echo "== control plane: building etcd ${etcd_version}" >&2
(cd "$etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
rm -rf "$bin" && mv "$tmp" "$bin"
printf '%s\n' "kubernetes ${kube_version}" "etcd ${etcd_version}" "$(go version)" >"${cache}/versions"
touch "${cache}/complete"
echo "== control plane built in $(($(date +%s) - start)) s: ${bin}" >&2
echo "$bin"
