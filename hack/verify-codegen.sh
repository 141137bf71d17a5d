#!/usr/bin/env bash
# Fails when the generated code under pkg/ is not what update-codegen.sh would
# write for the current API types: someone edited a type and did not
# regenerate, or edited generated code by hand.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Generate into a copy of the module so the working tree is never touched.
mkdir -p "$TMP/src"
cp -a "$ROOT/go.mod" "$ROOT/go.sum" "$ROOT/hack" "$ROOT/pkg" "$TMP/src/"
# update-codegen.sh downloads k8s.io/code-generator first when the module
# cache lacks it, so this works on a fresh machine.
if ! (cd "$TMP/src" && OUTPUT_ROOT="$TMP/src" ./hack/update-codegen.sh >/dev/null); then
  echo "verify-codegen.sh: hack/update-codegen.sh failed (see above), so the generated code could not be checked" >&2
  exit 1
fi

status=0
for dir in pkg/apis pkg/generated; do
  if ! diff -Nru "$ROOT/$dir" "$TMP/src/$dir" >"$TMP/diff" 2>&1; then
    echo "generated code in $dir is out of date; run hack/update-codegen.sh" >&2
    head -n 60 "$TMP/diff" >&2
    status=1
  fi
done
[[ $status == 0 ]] && echo "generated code is up to date"
exit "$status"
