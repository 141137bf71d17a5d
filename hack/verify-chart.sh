#!/usr/bin/env bash
# make verify-chart: helm lint and helm template of charts/elasti with its
# default values and with every values file in charts/elasti/ci/ (the
# KubeElasti values file and one per option), using the pinned helm that
# hack/build-cluster-bins.sh builds. test/chart's tests check what the
# renders contain (and load ci/prometheus-rule-values.yaml's PrometheusRule
# in the bed's Prometheus); this checks that each one lints and renders at
# all.
set -euo pipefail
cd "$(dirname "$0")/.."

helm_dir=$(hack/build-cluster-bins.sh helm)
helm="$helm_dir/helm"
chart=charts/elasti

run() {
  local what=$1; shift
  local out
  if ! out=$("$helm" "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "verify-chart: FAIL: $what" >&2
    exit 1
  fi
  echo "verify-chart: ok: $what"
}

run "helm lint (defaults)" lint --strict "$chart"
run "helm template (defaults)" template elasti "$chart" --namespace elasti --include-crds
for values in "$chart"/ci/*.yaml; do
  run "helm lint -f $values" lint --strict "$chart" -f "$values"
  run "helm template -f $values" template elasti "$chart" --namespace elasti --include-crds -f "$values"
done
