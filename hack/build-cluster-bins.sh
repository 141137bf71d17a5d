#!/usr/bin/env bash
# Builds (or reuses) the local control-plane binaries from the Go module proxy.
# The binaries are large, so they live in a per-version cache outside the repo:
#   ${ELASTI_CACHE_DIR:-$HOME/.cache/elasti}/bin/<component>-<version>/
# Prints the bin directory on stdout; progress goes to stderr.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.5}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${ELASTI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}"

kube_dir="$CACHE/bin/kube-$KUBE_VERSION"
etcd_dir="$CACHE/bin/etcd-$ETCD_VERSION"
kwok_dir="$CACHE/bin/kwok-$KWOK_VERSION"
out_dir="$CACHE/bin/cluster-$KUBE_VERSION-$ETCD_VERSION-$KWOK_VERSION"

log() { printf '[build-cluster-bins %s] %s\n' "$(date +%T)" "$*" >&2; }

# Progress: a cold build runs for minutes with no output from `go build`, so a
# heartbeat proves it is alive.
heartbeat() {
  local what=$1 pid=$2 start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15
    kill -0 "$pid" 2>/dev/null && log "still building $what ($((SECONDS - start))s elapsed)"
  done
}

run_with_heartbeat() {
  local what=$1; shift
  "$@" &
  local pid=$!
  heartbeat "$what" "$pid" &
  local hb=$!
  local rc=0
  wait "$pid" || rc=$?
  kill "$hb" 2>/dev/null || true
  wait "$hb" 2>/dev/null || true
  return "$rc"
}

build_kube() {
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  local have=1
  for b in "${bins[@]}"; do [[ -x "$kube_dir/$b" ]] || have=0; done
  if [[ $have == 1 ]]; then log "kube $KUBE_VERSION: cached in $kube_dir"; return; fi
  log "kube $KUBE_VERSION: cold build (about 4-5 minutes on 2 cores)"
  local src="$CACHE/src/kube-$KUBE_VERSION"
  rm -rf "$src"; mkdir -p "$src"
  local staging="v0${KUBE_VERSION#v1}"
  (
    cd "$src"
    cat > go.mod <<MOD
module elasti.local/kubetools

go 1.26
MOD
    cat > tools.go <<'GO'
package kubetools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    log "downloading k8s.io/kubernetes@$KUBE_VERSION module metadata"
    local modfile
    modfile=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
    # The kubernetes module replaces its staging modules with local paths; point
    # each at the published module of the matching version instead.
    grep -oE '^\s*k8s\.io/[a-z0-9.-]+ => \./staging/' "$modfile" | awk '{print $1}' | sort -u | while read -r m; do
      go mod edit -replace="$m=$m@$staging"
    done
    log "resolving dependencies (go mod tidy)"
    go mod tidy >&2
    local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${KUBE_VERSION#v1.}"
    ldflags="${ldflags%.*}"
    mkdir -p "$kube_dir.tmp"
    for b in "${bins[@]}"; do
      log "building $b"
      run_with_heartbeat "$b" go build -trimpath -ldflags "$ldflags" -o "$kube_dir.tmp/$b" "k8s.io/kubernetes/cmd/$b"
    done
  )
  rm -rf "$kube_dir"; mv "$kube_dir.tmp" "$kube_dir"
}

build_etcd() {
  if [[ -x "$etcd_dir/etcd" ]]; then log "etcd $ETCD_VERSION: cached"; return; fi
  log "etcd $ETCD_VERSION: building (about 30 s)"
  local src="$CACHE/src/etcd-$ETCD_VERSION"
  rm -rf "$src"; mkdir -p "$src"
  (
    cd "$src"
    printf 'module elasti.local/etcdtool\n\ngo 1.26\n' > go.mod
    cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go mod tidy >&2
    mkdir -p "$etcd_dir.tmp"
    run_with_heartbeat etcd go build -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" .
  )
  rm -rf "$etcd_dir"; mv "$etcd_dir.tmp" "$etcd_dir"
}

build_kwok() {
  if [[ -x "$kwok_dir/kwok" && -s "$kwok_dir/stages.yaml" ]]; then log "kwok $KWOK_VERSION: cached"; return; fi
  log "kwok $KWOK_VERSION: building (about 1 minute)"
  mkdir -p "$kwok_dir.tmp"
  run_with_heartbeat kwok env GOBIN="$kwok_dir.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  local kwok_src
  kwok_src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  local stage="$kwok_src/kustomize/stage"
  : > "$kwok_dir.tmp/stages.yaml"
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    { echo "---"; cat "$stage/$f"; } >> "$kwok_dir.tmp/stages.yaml"
  done
  rm -rf "$kwok_dir"; mv "$kwok_dir.tmp" "$kwok_dir"
}

# Test packages start in parallel; only one of them may build at a time.
mkdir -p "$CACHE"
exec 9>"$CACHE/build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/build.lock; waiting for it"
  flock 9
fi

build_etcd
build_kwok
build_kube

# One directory with every binary, so callers need a single path.
mkdir -p "$out_dir"
for f in "$kube_dir"/* "$etcd_dir"/* "$kwok_dir"/*; do
  ln -sf "$f" "$out_dir/$(basename "$f")"
done
log "binaries ready in $out_dir"
echo "$out_dir"
