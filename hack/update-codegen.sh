#!/usr/bin/env bash
# Regenerates deepcopy, register, and the typed clientset, listers and
# informers for pkg/apis with k8s.io/code-generator's kube_codegen.sh.
# OUTPUT_ROOT overrides where pkg/ is written (verify-codegen.sh uses a copy).
set -euo pipefail
# Code generation concerns the product's module alone: outside the workspace
# (go.work) `go list -m` names only it, and nothing of the image builder's or
# the test bed's modules is downloaded.
export GOWORK=off

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTPUT_ROOT="${OUTPUT_ROOT:-$ROOT}"
MODULE="$(cd "$ROOT" && go list -m)"

# `go list -m -f {{.Dir}}` prints nothing for a module that is not in the
# module cache yet (a fresh machine), so download the version go.mod pins
# (through hack/tools.go) first; with the module cached this needs no network.
if ! (cd "$ROOT" && go mod download k8s.io/code-generator); then
  echo "update-codegen.sh: could not download k8s.io/code-generator (the version pinned in go.mod); check GOPROXY and your network" >&2
  exit 1
fi
CODEGEN_PKG="$(cd "$ROOT" && go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "$CODEGEN_PKG" || ! -f "$CODEGEN_PKG/kube_codegen.sh" ]]; then
  echo "update-codegen.sh: k8s.io/code-generator is not in the module cache ($(cd "$ROOT" && go env GOMODCACHE))" \
    "even after 'go mod download k8s.io/code-generator'; got directory '${CODEGEN_PKG}'" >&2
  exit 1
fi

# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"

cd "$OUTPUT_ROOT"
kube::codegen::gen_register \
  --boilerplate "$ROOT/hack/boilerplate.go.txt" \
  "$OUTPUT_ROOT/pkg/apis"

kube::codegen::gen_helpers \
  --boilerplate "$ROOT/hack/boilerplate.go.txt" \
  "$OUTPUT_ROOT/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --output-dir "$OUTPUT_ROOT/pkg/generated" \
  --output-pkg "$MODULE/pkg/generated" \
  --boilerplate "$ROOT/hack/boilerplate.go.txt" \
  "$OUTPUT_ROOT/pkg/apis"
