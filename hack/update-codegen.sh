#!/usr/bin/env bash
# Regenerates deepcopy, register, and the typed clientset, listers and
# informers for pkg/apis with k8s.io/code-generator's kube_codegen.sh.
# OUTPUT_ROOT overrides where pkg/ is written (verify-codegen.sh uses a copy).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTPUT_ROOT="${OUTPUT_ROOT:-$ROOT}"
MODULE="$(cd "$ROOT" && go list -m)"
CODEGEN_PKG="$(cd "$ROOT" && go list -m -f '{{.Dir}}' k8s.io/code-generator)"

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
