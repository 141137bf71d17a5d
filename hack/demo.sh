#!/usr/bin/env bash
# make demo: see test/cmd/demo/main.go. Needs root (for the pod network
# namespace) and Go; everything else comes from the Go module proxy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ $(id -u) != 0 ]]; then
  echo "make demo builds a network namespace for the pods and needs root; run it as root (sudo -E make demo)." >&2
  exit 1
fi
exec go run ./test/cmd/demo "$@"
