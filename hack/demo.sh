#!/usr/bin/env bash
# make demo: bring up the local cluster, install elasti's CRD and manifests,
# apply a sample app with an ElastiService, and show what to try next.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

step() { printf '\n==> %s\n' "$*"; }

step "starting the local control plane (cached binaries make this ~15 s)"
eval "$(go run ./hack/localcluster up)"
BIN_DIR="$(hack/build-cluster-bins.sh 2>/dev/null)"
kubectl() { "$BIN_DIR/kubectl" "$@"; }

step "installing elasti: kubectl apply -f manifests/"
kubectl apply -f manifests/
kubectl wait --for=condition=Established crd/elastiservices.elasti.truefoundry.com --timeout=60s

step "applying the sample app (Deployment, Service, ElastiService) from deploy/samples/demo-app.yaml"
kubectl apply -f deploy/samples/demo-app.yaml
kubectl -n demo rollout status deployment/hello --timeout=60s

step "the ElastiService as the cluster sees it"
kubectl -n demo get elastiservices -o wide
kubectl -n demo get elastisvc hello -o yaml | sed -n '/^spec:/,$p'

step "the apiserver itself refuses a bad ElastiService"
if kubectl -n demo apply -f - <<'BAD' 2>&1; then echo "unexpected: accepted"; exit 1; fi
apiVersion: elasti.truefoundry.com/v1alpha1
kind: ElastiService
metadata: {name: broken}
spec:
  service: hello
  minTargetReplicas: 0
  scaleTargetRef: {apiVersion: apps/v1, kind: CronJob, name: hello}
BAD

cat <<EOT

The local cluster keeps running. Try:
  export KUBECONFIG=$KUBECONFIG
  $BIN_DIR/kubectl -n demo get elastisvc,deploy,svc,endpointslices
  $BIN_DIR/kubectl -n demo scale deployment/hello --replicas=0
  $BIN_DIR/kubectl apply -f deploy/samples/kubeelasti-legacy.yaml   # a KubeElasti manifest, unchanged
Stop it with: make cluster-down
EOT
