#!/usr/bin/env bash
# Builds (or reuses) the local cluster binaries from the Go module proxy:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
#   kube-proxy and kubelet (one Kubernetes version), etcd, kwok (plus its
#   stages), CoreDNS (with its kubernetes plugin), Traefik, Prometheus and
#   helm, plus the standard Gateway API CRDs of the version Traefik's go.mod
#   pins,
# after making sure the host has nft (>= 1.0.1), conntrack and ip, which
# kube-proxy's nftables mode and the network namespaces need, iptables
# (iptables-save and -restore) for its iptables mode, and containerd,
# runc and the CNI plugins, which the real kubelet node
# (test/localcluster/realnode) runs containers with, and chromium, the
# headless browser the waiting page is tested in. Installing containerd
# starts no daemon (Debian's package leaves that to an init system); the
# real node starts its own, with its own socket and directories.
#
# The binaries are large, so they live in a per-version cache outside the repo,
# one directory per component, each filled through <dir>.tmp and mv:
#   ${ELASTI_CACHE_DIR:-$HOME/.cache/elasti}/bin/<component>-<version>/
# Prints one directory of symlinks to every binary on stdout; its name holds
# every component version. Progress lines go to stderr; the chatty output of go
# and apt-get goes to $CACHE/logs/<component>.log, whose last 30 lines are
# printed when a step fails.
#
# Cold build times, measured on a busy 2-core machine (module downloads
# included): etcd about 2 minutes, kwok about 3 minutes, the four kube binaries
# about 17-19 minutes, kube-proxy under a minute and kubelet about 1.5 minutes
# once those are built, CoreDNS about 6 minutes, Traefik about 10 minutes,
# Prometheus (with only its Kubernetes service discovery) 22 minutes at load
# average 15-18 (all of Prometheus took 3.6 minutes on a quiet machine);
# installing containerd, runc and the CNI plugins about 15 seconds; helm about
# 2 minutes.
#
# `hack/build-cluster-bins.sh helm` builds (or reuses) helm alone, without the
# host packages, and prints the directory holding it: make verify lints and
# renders the chart with it on a machine that has no cluster binaries.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.5}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
# v3.7.x cannot be used: its go.mod replaces the nested module
# github.com/traefik/traefik/dynamic/ext with ./pkg/config/dynamic/ext, and the
# module zip leaves nested modules out, so that directory is missing.
# By default Traefik checks for new releases over the internet: run it with
# --global.checkNewVersion=false --global.sendAnonymousUsage=false.
TRAEFIK_VERSION="${TRAEFIK_VERSION:-v3.6.12}"
# Prometheus 3 is published as module versions v0.3MM.P for release 3.MM.P.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
# Helm 3, the line charts/elasti is written for (apiVersion v2 charts,
# crds/ installed before the templates and never upgraded or deleted).
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${ELASTI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/elasti}"

# The CoreDNS plugins a cluster DNS needs: those of kubeadm's default Corefile
# (errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload,
# loadbalance) plus log and whoami. Not every plugin (core/plugin): that pulls
# in cloud SDKs and takes far longer to build. The order they run in is
# CoreDNS's own, read from core/dnsserver/zdirectives.go at build time.
COREDNS_PLUGINS=(errors log health ready prometheus kubernetes forward cache loop reload loadbalance whoami)

KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kube-proxy kubelet)

kube_dir="$CACHE/bin/kube-$KUBE_VERSION"
etcd_dir="$CACHE/bin/etcd-$ETCD_VERSION"
kwok_dir="$CACHE/bin/kwok-$KWOK_VERSION"
coredns_dir="$CACHE/bin/coredns-$COREDNS_VERSION"
traefik_dir="$CACHE/bin/traefik-$TRAEFIK_VERSION"
prometheus_dir="$CACHE/bin/prometheus-$PROMETHEUS_VERSION"
helm_dir="$CACHE/bin/helm-$HELM_VERSION"
out_dir="$CACHE/bin/cluster-kube-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-coredns-$COREDNS_VERSION-traefik-$TRAEFIK_VERSION-prometheus-$PROMETHEUS_VERSION-helm-$HELM_VERSION"
logs_dir="$CACHE/logs"

# nft, conntrack, ip and runc live in sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf '[build-cluster-bins %s] %s\n' "$(date +%T)" "$*" >&2; }

only=${1:-}
if [[ -n $only && $only != helm ]]; then
  echo "usage: $0 [helm]" >&2
  exit 2
fi

if [[ -z $only ]]; then
  log "checking host packages (nft, conntrack, ip, containerd, runc, CNI plugins), then reusing or building kube $KUBE_VERSION (apiserver, controller-manager, scheduler, kubectl, kube-proxy, kubelet), etcd $ETCD_VERSION, kwok $KWOK_VERSION, CoreDNS $COREDNS_VERSION, Traefik $TRAEFIK_VERSION, Prometheus $PROMETHEUS_VERSION and helm $HELM_VERSION in $CACHE/bin"
else
  log "reusing or building helm $HELM_VERSION in $CACHE/bin"
fi

mkdir -p "$CACHE/bin" "$CACHE/src" "$logs_dir"

# A heartbeat line every 15 s proves a long step is alive. Its sleep has no
# stdout, stderr or lock fd: a caller reading this script's output through a
# pipe would otherwise wait for an orphaned sleep, and the build lock would be
# held until it ended.
heartbeat() {
  local comp=$1 what=$2 pid=$3 start=$SECONDS sp=
  trap 'kill $sp 2>/dev/null; exit 0' TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 15 </dev/null >/dev/null 2>&1 8>&- 9>&- &
    sp=$!
    wait "$sp" || true
    if kill -0 "$pid" 2>/dev/null; then log "$comp: still $what ($((SECONDS - start))s elapsed)"; fi
  done
}

fail_with_log() {
  local logfile="$logs_dir/$1.log"
  log "ERROR: $1: $2"
  if [[ -s $logfile ]]; then
    log "last 30 lines of $logfile:"
    tail -n 30 "$logfile" | sed 's/^/    /' >&2
  fi
  log "ERROR: $1: $2 (full log: $logfile)"
  exit 1
}

# try_step COMPONENT WHAT CMD...: prints a progress line, runs CMD with its
# stdout and stderr appended to the component's log and a heartbeat, and
# returns CMD's exit status.
try_step() {
  local comp=$1 what=$2; shift 2
  local logfile="$logs_dir/$comp.log" rc=0
  log "$comp: $what"
  printf '\n==> %s %s\n$ %s\n' "$(date +%T)" "$what" "$*" >>"$logfile"
  "$@" </dev/null >>"$logfile" 2>&1 &
  local pid=$!
  heartbeat "$comp" "$what" "$pid" &
  local hb=$!
  wait "$pid" || rc=$?
  kill "$hb" 2>/dev/null || true
  wait "$hb" 2>/dev/null || true
  return "$rc"
}

# step COMPONENT WHAT CMD...: try_step, stopping the script with the log's
# tail when CMD fails.
step() {
  local rc=0
  try_step "$@" || rc=$?
  if ((rc != 0)); then fail_with_log "$1" "$2 failed (exit $rc)"; fi
}

# mod_download COMPONENT MODULE@VERSION FIELD: downloads a module and prints one
# field (Dir, GoMod, Info) of `go mod download -json`.
mod_download() {
  local comp=$1 mod=$2 field=$3 json rc=0
  json=$(go mod download -json "$mod" 2>>"$logs_dir/$comp.log") || rc=$?
  if ((rc != 0)); then
    printf '%s\n' "$json" >>"$logs_dir/$comp.log"
    fail_with_log "$comp" "go mod download $mod failed (exit $rc)"
  fi
  printf '%s\n' "$json" | sed -n "s/.*\"$field\": \"\(.*\)\".*/\1/p"
}

minutes() { local s=$1; printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# --- host packages --------------------------------------------------------

nft_version() { nft --version 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1; }

# version_ge A B: A >= B for dotted versions.
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

# Where Debian's containernetworking-plugins puts the plugins; the real node
# uses bridge, host-local and loopback.
CNI_BIN_DIR=/usr/lib/cni

missing_packages() {
  command -v nft >/dev/null && version_ge "$(nft_version)" 1.0.1 || echo nftables
  command -v conntrack >/dev/null || echo conntrack
  command -v ip >/dev/null || echo iproute2
  command -v iptables-restore >/dev/null && command -v iptables-save >/dev/null || echo iptables
  command -v containerd >/dev/null && command -v ctr >/dev/null || echo containerd
  command -v runc >/dev/null || echo runc
  [[ -x $CNI_BIN_DIR/bridge && -x $CNI_BIN_DIR/host-local && -x $CNI_BIN_DIR/loopback ]] || echo containernetworking-plugins
  command -v chromium >/dev/null || echo chromium
}

host_summary() { echo "nft $(nft_version), conntrack, ip, iptables, containerd, runc, the CNI plugins and chromium present"; }

apt_install() {
  try_step host-packages "apt-get install -y $*" \
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=300 "$@"
}

ensure_host_packages() {
  local missing
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]} == 0)); then
    log "host: $(host_summary)"
    return
  fi
  sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      log "ERROR: host packages missing: ${missing[*]} (kube-proxy needs nft >= 1.0.1, conntrack and ip, its iptables mode iptables; the real node containerd, runc and the CNI plugins, the waiting page's browser test chromium)"
      log "ERROR: install them as root: apt-get install -y ${missing[*]}"
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null; then
    log "ERROR: host packages missing: ${missing[*]} and there is no apt-get; install nft >= 1.0.1, conntrack, ip (iproute2), iptables, containerd, runc, the CNI plugins ($CNI_BIN_DIR) and chromium by hand"
    exit 1
  fi
  # Parallel runs install once; apt-get would trip over its own lock.
  exec 8>"$CACHE/host-packages.lock"
  flock 8
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]} > 0)); then
    : >"$logs_dir/host-packages.log"
    log "host: installing ${missing[*]} with apt-get (kube-proxy needs nft >= 1.0.1, conntrack and ip, its iptables mode iptables; the real node containerd, runc and the CNI plugins; the waiting page's browser test chromium)"
    if ! apt_install "${missing[@]}"; then
      log "host: plain apt-get install failed; running apt-get update first"
      try_step host-packages "apt-get update" "${sudo[@]}" apt-get update -o DPkg::Lock::Timeout=300 ||
        fail_with_log host-packages "apt-get update failed; cannot install ${missing[*]}"
      apt_install "${missing[@]}" ||
        fail_with_log host-packages "apt-get install -y ${missing[*]} failed; install them by hand"
    fi
    mapfile -t missing < <(missing_packages)
    if ((${#missing[@]} > 0)); then
      fail_with_log host-packages "still missing after apt-get install: ${missing[*]} (nft is $(nft_version || true); kube-proxy needs >= 1.0.1)"
    fi
    log "host: installed; $(host_summary)"
  else
    log "host: another run installed them; $(host_summary)"
  fi
  exec 8>&-
}

# --- kube -----------------------------------------------------------------

kube_tools_go() {
  printf 'package kubetools\n\nimport (\n'
  local b
  for b in "${KUBE_BINS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b"; done
  printf ')\n'
}

# kube_module SRC: makes SRC a tools module that requires k8s.io/kubernetes and
# blank-imports every cmd/ in KUBE_BINS. An existing module of the right
# version is reused (a .tidied marker says its go mod tidy finished for the
# current tools.go); anything else is recreated.
kube_module() {
  local src=$1 tools
  tools=$(kube_tools_go)
  if [[ -f $src/go.mod && -f $src/go.sum ]] && grep -qE "k8s\.io/kubernetes ${KUBE_VERSION//./\\.}( |\$)" "$src/go.mod"; then
    if [[ -f $src/.tidied && -f $src/tools.go && "$(<"$src/tools.go")" == "$tools" ]]; then
      log "kube: reusing the tools module in $src"
      return
    fi
    log "kube: reusing the tools module in $src; updating tools.go to import ${KUBE_BINS[*]}"
    rm -f "$src/.tidied"
    printf '%s\n' "$tools" >"$src/tools.go"
  else
    log "kube: creating the tools module in $src"
    rm -rf "$src"
    mkdir -p "$src"
    printf 'module elasti.local/kubetools\n\ngo 1.26\n' >"$src/go.mod"
    printf '%s\n' "$tools" >"$src/tools.go"
    log "kube: downloading k8s.io/kubernetes@$KUBE_VERSION module metadata"
    local modfile
    modfile=$(mod_download kube "k8s.io/kubernetes@$KUBE_VERSION" GoMod)
    # The kubernetes module replaces its staging modules with local paths;
    # point each at the published module of the matching version instead.
    local staging="v0${KUBE_VERSION#v1}" args=("-require=k8s.io/kubernetes@$KUBE_VERSION") m
    for m in $(grep -oE '^\s*k8s\.io/[a-z0-9.-]+ => \./staging/' "$modfile" | awk '{print $1}' | sort -u); do
      args+=("-replace=$m=$m@$staging")
    done
    (cd "$src" && step kube "go mod edit (require kubernetes, replace $((${#args[@]} - 1)) staging modules)" go mod edit "${args[@]}")
  fi
  (cd "$src" && step kube "resolving dependencies (go mod tidy; downloads every module on a cold machine)" go mod tidy)
  : >"$src/.tidied"
}

build_kube() {
  local missing=() b
  for b in "${KUBE_BINS[@]}"; do [[ -x $kube_dir/$b ]] || missing+=("$b"); done
  if ((${#missing[@]} == 0)); then log "kube $KUBE_VERSION: cached in $kube_dir"; return; fi
  : >"$logs_dir/kube.log"
  local start=$SECONDS
  if ((${#missing[@]} == ${#KUBE_BINS[@]})); then
    log "kube $KUBE_VERSION: cold build of ${missing[*]} (about 17-19 minutes on 2 cores)"
  elif [[ ${missing[*]} == kube-proxy ]]; then
    log "kube $KUBE_VERSION: building kube-proxy only, the rest is cached in $kube_dir (under a minute on 2 cores)"
  elif [[ ${missing[*]} == kubelet ]]; then
    log "kube $KUBE_VERSION: building kubelet only, the rest is cached in $kube_dir (about 1.5 minutes on 2 cores)"
  else
    log "kube $KUBE_VERSION: building ${missing[*]} only, the rest is cached in $kube_dir"
  fi
  local src="$CACHE/src/kube-$KUBE_VERSION"
  kube_module "$src"
  local minor=${KUBE_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  rm -rf "$kube_dir.tmp"
  mkdir -p "$kube_dir.tmp" "$kube_dir"
  for b in "${missing[@]}"; do
    local t=$SECONDS
    (cd "$src" && step kube "building $b" go build -trimpath -ldflags "$ldflags" -o "$kube_dir.tmp/$b" "k8s.io/kubernetes/cmd/$b")
    # One binary at a time, so binaries already in $kube_dir stay valid.
    mv -f "$kube_dir.tmp/$b" "$kube_dir/$b"
    log "kube: $b built in $(minutes $((SECONDS - t)))"
  done
  rmdir "$kube_dir.tmp"
  log "kube $KUBE_VERSION: ${missing[*]} ready in $kube_dir after $(minutes $((SECONDS - start)))"
}

# --- etcd -----------------------------------------------------------------

build_etcd() {
  if [[ -x $etcd_dir/etcd ]]; then log "etcd $ETCD_VERSION: cached"; return; fi
  log "etcd $ETCD_VERSION: cold build (about 2 minutes on 2 cores)"
  : >"$logs_dir/etcd.log"
  local start=$SECONDS src="$CACHE/src/etcd-$ETCD_VERSION"
  rm -rf "$src" "$etcd_dir.tmp"
  mkdir -p "$src" "$etcd_dir.tmp"
  (
    cd "$src"
    printf 'module elasti.local/etcdtool\n\ngo 1.26\n' >go.mod
    cat >main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    step etcd "fetching go.etcd.io/etcd/server/v3@$ETCD_VERSION" go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    step etcd "resolving dependencies (go mod tidy)" go mod tidy
    step etcd "building etcd" go build -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" .
  )
  rm -rf "$etcd_dir"
  mv "$etcd_dir.tmp" "$etcd_dir"
  log "etcd $ETCD_VERSION: built in $(minutes $((SECONDS - start)))"
}

# --- kwok -----------------------------------------------------------------

build_kwok() {
  if [[ -x $kwok_dir/kwok && -s $kwok_dir/stages.yaml ]]; then log "kwok $KWOK_VERSION: cached"; return; fi
  log "kwok $KWOK_VERSION: cold build (about 3 minutes on 2 cores)"
  : >"$logs_dir/kwok.log"
  local start=$SECONDS
  rm -rf "$kwok_dir.tmp"
  mkdir -p "$kwok_dir.tmp"
  step kwok "building kwok (go install)" env GOBIN="$kwok_dir.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  local kwok_src
  kwok_src=$(mod_download kwok "sigs.k8s.io/kwok@$KWOK_VERSION" Dir)
  local stage="$kwok_src/kustomize/stage" f
  : >"$kwok_dir.tmp/stages.yaml"
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    { echo "---"; cat "$stage/$f"; } >>"$kwok_dir.tmp/stages.yaml"
  done
  rm -rf "$kwok_dir"
  mv "$kwok_dir.tmp" "$kwok_dir"
  log "kwok $KWOK_VERSION: built in $(minutes $((SECONDS - start)))"
}

# --- CoreDNS --------------------------------------------------------------

# coredns_main MODULE_DIR: prints a main package with the COREDNS_PLUGINS,
# whose directives keep the order of the module's zdirectives.go and whose
# import paths come from its plugin.cfg.
coredns_main() {
  local dir=$1 order=() imports=() name repo p
  mapfile -t order < <(sed -n '/^var Directives = \[\]string{/,/^}/p' "$dir/core/dnsserver/zdirectives.go" | grep -oE '"[a-z0-9_]+"' | tr -d '"')
  ((${#order[@]} > 0)) || { echo "no Directives found in $dir/core/dnsserver/zdirectives.go" >&2; return 1; }
  for p in "${COREDNS_PLUGINS[@]}"; do
    printf '%s\n' "${order[@]}" | grep -qx "$p" || { echo "plugin $p is not in $dir/core/dnsserver/zdirectives.go" >&2; return 1; }
  done
  local directives=()
  for name in "${order[@]}"; do
    printf '%s\n' "${COREDNS_PLUGINS[@]}" | grep -qx "$name" || continue
    repo=$(sed -n "s/^$name:\(.*\)\$/\1/p" "$dir/plugin.cfg")
    [[ -n $repo ]] || { echo "plugin $name is not in $dir/plugin.cfg" >&2; return 1; }
    if [[ -d $dir/plugin/$repo ]]; then repo="github.com/coredns/coredns/plugin/$repo"; fi
    directives+=("$name")
    imports+=("$repo")
  done
  printf '// Code generated by hack/build-cluster-bins.sh: CoreDNS %s with only\n' "$COREDNS_VERSION"
  printf '// the plugins a cluster DNS needs. DO NOT EDIT.\n\npackage main\n\nimport (\n'
  printf '\t"github.com/coredns/coredns/core/dnsserver"\n\t"github.com/coredns/coredns/coremain"\n\n'
  printf '\t_ "%s"\n' "${imports[@]}"
  printf ')\n\n// The plugins above in the order of core/dnsserver/zdirectives.go.\nfunc init() {\n\tdnsserver.Directives = []string{\n'
  printf '\t\t"%s",\n' "${directives[@]}"
  printf '\t}\n}\n\nfunc main() { coremain.Run() }\n'
}

coredns_plugin_list() { printf '%s\n' "${COREDNS_PLUGINS[@]}" | sort | paste -sd' '; }

build_coredns() {
  if [[ -x $coredns_dir/coredns && "$(cat "$coredns_dir/plugins.txt" 2>/dev/null)" == "$(coredns_plugin_list)" ]]; then
    log "coredns $COREDNS_VERSION: cached"
    return
  fi
  log "coredns $COREDNS_VERSION: cold build with plugins ${COREDNS_PLUGINS[*]} (about 6 minutes on 2 cores)"
  : >"$logs_dir/coredns.log"
  local start=$SECONDS src="$CACHE/src/coredns-$COREDNS_VERSION"
  rm -rf "$src" "$coredns_dir.tmp"
  mkdir -p "$src" "$coredns_dir.tmp"
  (
    cd "$src"
    printf 'module elasti.local/corednstool\n\ngo 1.26\n' >go.mod
    step coredns "fetching github.com/coredns/coredns@$COREDNS_VERSION" go get "github.com/coredns/coredns@$COREDNS_VERSION"
    local dir
    dir=$(mod_download coredns "github.com/coredns/coredns@$COREDNS_VERSION" Dir)
    coredns_main "$dir" >main.go 2>>"$logs_dir/coredns.log" ||
      fail_with_log coredns "cannot generate main.go from $dir"
    step coredns "resolving dependencies (go mod tidy)" go mod tidy
    step coredns "building coredns" env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$coredns_dir.tmp/coredns" .
  )
  local bin="$coredns_dir.tmp/coredns" out p
  out=$("$bin" -version 2>&1) || fail_with_log coredns "coredns -version failed: $out"
  [[ $out == *"CoreDNS-${COREDNS_VERSION#v}"* ]] ||
    fail_with_log coredns "coredns -version printed '$(paste -sd' ' <<<"$out")', not CoreDNS-${COREDNS_VERSION#v}"
  out=$("$bin" -plugins 2>&1) || fail_with_log coredns "coredns -plugins failed: $out"
  for p in "${COREDNS_PLUGINS[@]}"; do
    # One plugin a line; older releases prefixed them with the server type.
    grep -qE "^[[:space:]]*(dns\.)?$p\$" <<<"$out" ||
      fail_with_log coredns "coredns -plugins does not list $p: $(paste -sd' ' <<<"$out")"
  done
  coredns_plugin_list >"$coredns_dir.tmp/plugins.txt"
  rm -rf "$coredns_dir"
  mv "$coredns_dir.tmp" "$coredns_dir"
  log "coredns $COREDNS_VERSION: built in $(minutes $((SECONDS - start)))"
}

# --- Traefik --------------------------------------------------------------

build_traefik() {
  if [[ -x $traefik_dir/traefik ]]; then log "traefik $TRAEFIK_VERSION: cached"; return; fi
  log "traefik $TRAEFIK_VERSION: cold build (about 10 minutes on 2 cores)"
  : >"$logs_dir/traefik.log"
  local start=$SECONDS src="$CACHE/src/traefik-$TRAEFIK_VERSION"
  # Traefik's go.mod has replace directives, so `go install` refuses it; build
  # a writable copy of the module as the main module instead.
  log "traefik: downloading github.com/traefik/traefik/v3@$TRAEFIK_VERSION"
  local dir info
  dir=$(mod_download traefik "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" Dir)
  info=$(mod_download traefik "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" Info)
  rm -rf "$src" "$traefik_dir.tmp"
  cp -R "$dir" "$src"
  chmod -R u+w "$src"
  mkdir -p "$traefik_dir.tmp"
  # webui embeds static/ (//go:embed static); the module zip has only a
  # placeholder file there, so the dashboard is empty but the build works.
  [[ -d $src/webui/static && -n "$(ls -A "$src/webui/static")" ]] ||
    fail_with_log traefik "$src/webui/static is missing or empty; //go:embed static in webui would fail"
  local vpkg=github.com/traefik/traefik/v3/pkg/version
  grep -qE '^\s*Version\s*=' "$src/pkg/version/version.go" ||
    fail_with_log traefik "$src/pkg/version/version.go has no Version variable; check where -X $vpkg.Version should point"
  local date
  date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
  (
    cd "$src"
    step traefik "downloading the modules ./cmd/traefik needs (go list -deps)" go list -deps ./cmd/traefik
    step traefik "building traefik" env CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X $vpkg.Version=$TRAEFIK_VERSION -X $vpkg.BuildDate=${date:-unknown}" \
      -o "$traefik_dir.tmp/traefik" ./cmd/traefik
  )
  local out
  out=$("$traefik_dir.tmp/traefik" version 2>&1) || fail_with_log traefik "traefik version failed: $out"
  grep -qE "^Version:\s+$TRAEFIK_VERSION\$" <<<"$out" ||
    fail_with_log traefik "traefik version printed '$out', not $TRAEFIK_VERSION"
  rm -rf "$traefik_dir"
  mv "$traefik_dir.tmp" "$traefik_dir"
  log "traefik $TRAEFIK_VERSION: built in $(minutes $((SECONDS - start)))"
}

# --- Prometheus -----------------------------------------------------------

# prometheus_release VERSION: the release a Prometheus 3 module version stands
# for (v0.316.0 -> 3.16.0), which `prometheus --version` should print.
prometheus_release() {
  local v=${1#v0.} minor patch
  minor=${v%%.*}
  patch=${v#*.}
  [[ $minor =~ ^[0-9]{3,}$ ]] || return 1
  printf '%d.%d.%s\n' $((10#$minor / 100)) $((10#$minor % 100)) "$patch"
}

build_prometheus() {
  if [[ -x $prometheus_dir/prometheus ]]; then log "prometheus $PROMETHEUS_VERSION: cached"; return; fi
  log "prometheus $PROMETHEUS_VERSION: cold build with Kubernetes service discovery only (minutes on a quiet 2-core machine, 20 or more on a busy one)"
  : >"$logs_dir/prometheus.log"
  local start=$SECONDS release
  release=$(prometheus_release "$PROMETHEUS_VERSION") ||
    fail_with_log prometheus "$PROMETHEUS_VERSION is not a Prometheus 3 module version (v0.3MM.P)"
  local info date
  info=$(mod_download prometheus "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" Info)
  date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")
  rm -rf "$prometheus_dir.tmp"
  mkdir -p "$prometheus_dir.tmp"
  # remove_all_sd + enable_kubernetes_sd: the bed discovers its targets through
  # the apiserver only, and leaving out the cloud SDKs of the other service
  # discoveries halves the build. Without builtinassets the web UI has no
  # assets (the module zip lacks them); the HTTP API, which elasti queries, is
  # complete. Without the -X flags --version prints no version.
  local vpkg=github.com/prometheus/common/version
  step prometheus "building prometheus (go install; downloads its modules on a cold machine)" \
    env GOBIN="$prometheus_dir.tmp" CGO_ENABLED=0 go install -trimpath -tags netgo,remove_all_sd,enable_kubernetes_sd \
    -ldflags "-s -w -X $vpkg.Version=$release -X $vpkg.Revision=$PROMETHEUS_VERSION -X $vpkg.Branch=release-${release%.*} -X $vpkg.BuildUser=elasti@build-cluster-bins -X $vpkg.BuildDate=${date:-unknown}" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
  local out
  out=$("$prometheus_dir.tmp/prometheus" --version 2>&1) || fail_with_log prometheus "prometheus --version failed: $out"
  grep -qE "^prometheus, version ${release//./\\.} " <<<"$out" ||
    fail_with_log prometheus "prometheus --version printed '$(paste -sd' ' <<<"$out")', not version $release"
  rm -rf "$prometheus_dir"
  mv "$prometheus_dir.tmp" "$prometheus_dir"
  log "prometheus $PROMETHEUS_VERSION ($release): built in $(minutes $((SECONDS - start)))"
}

# --- helm -----------------------------------------------------------------

build_helm() {
  if [[ -x $helm_dir/helm ]]; then log "helm $HELM_VERSION: cached"; return; fi
  log "helm $HELM_VERSION: cold build (about 2 minutes on 2 cores)"
  : >"$logs_dir/helm.log"
  local start=$SECONDS
  rm -rf "$helm_dir.tmp"
  mkdir -p "$helm_dir.tmp"
  # helm reports the version linked into internal/version; the module's own
  # default lags behind the tag.
  step helm "building helm (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION)" env GOBIN="$helm_dir.tmp" CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  local out
  out=$("$helm_dir.tmp/helm" version --template '{{.Version}}' 2>&1) || fail_with_log helm "helm version failed: $out"
  [[ $out == "$HELM_VERSION" ]] || fail_with_log helm "helm version printed '$out', not $HELM_VERSION"
  rm -rf "$helm_dir"
  mv "$helm_dir.tmp" "$helm_dir"
  log "helm $HELM_VERSION: built in $(minutes $((SECONDS - start)))"
}

# --- Gateway API CRDs -----------------------------------------------------

# gateway_api_crds prints the directory of the standard Gateway API CRDs
# (config/crd/standard in the sigs.k8s.io/gateway-api module), at the version
# Traefik's go.mod requires: its Gateway API provider was built against those
# types, so the bed serves exactly them. Only the module zip is downloaded; the
# YAML is read in place from the module cache, nothing is copied.
gateway_api_crds() {
  local modfile version dir
  modfile=$(mod_download gateway-api "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" GoMod)
  version=$(awk '$1 == "sigs.k8s.io/gateway-api" {print $2; exit}' "$modfile")
  [[ -n $version ]] || fail_with_log gateway-api "no sigs.k8s.io/gateway-api requirement in $modfile"
  dir=$(mod_download gateway-api "sigs.k8s.io/gateway-api@$version" Dir)
  ls "$dir"/config/crd/standard/*.yaml >/dev/null 2>&1 ||
    fail_with_log gateway-api "no CRDs in $dir/config/crd/standard"
  log "gateway-api $version (Traefik $TRAEFIK_VERSION's): CRDs in $dir/config/crd/standard"
  printf '%s\n' "$dir/config/crd/standard"
}

# --- main -----------------------------------------------------------------

if [[ $only == helm ]]; then
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    log "another build holds $CACHE/build.lock; waiting for it"
    flock 9
  fi
  build_helm
  log "helm ready in $helm_dir"
  echo "$helm_dir"
  exit 0
fi

ensure_host_packages

# Test packages start in parallel; only one of them may build at a time.
exec 9>"$CACHE/build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/build.lock; waiting for it"
  flock 9
fi

build_etcd
build_kwok
build_kube
build_coredns
build_traefik
build_prometheus
build_helm
gateway_crds=$(gateway_api_crds)

# One directory with every binary, so callers need a single path.
mkdir -p "$out_dir"
for f in "${KUBE_BINS[@]/#/$kube_dir/}" "$etcd_dir/etcd" "$kwok_dir/kwok" "$kwok_dir/stages.yaml" \
  "$coredns_dir/coredns" "$traefik_dir/traefik" "$prometheus_dir/prometheus" "$helm_dir/helm"; do
  ln -sfn "$f" "$out_dir/$(basename "$f")"
done
ln -sfn "$gateway_crds" "$out_dir/gateway-api-crds"
log "binaries ready in $out_dir"
echo "$out_dir"
