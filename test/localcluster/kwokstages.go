package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AwaitingAddressReason is the reason of a kwok pod's Ready condition
// while it is False because nobody has made the pod's address answer yet:
// with Options.ReadyAfterAddress, kwok starts a pod that way, and the pod
// network's fake kubelet (podnet.Kubelet) publishes Ready once the address
// answers. A kubelet does the same: it writes Ready only after a probe
// passed on the pod's address, never before the pod can be reached.
const AwaitingAddressReason = "AwaitingAddress"

// kwokReadyStage is the name of kwok's own stage that starts a scheduled
// pod: it gives the pod its address and reports it Ready in the same write.
const kwokReadyStage = "pod-ready"

// podStartedStage replaces kwokReadyStage when Ready is left to the fake
// kubelet: the same start (address, Running, containers running), with
// Ready, ContainersReady and every readiness gate False for
// AwaitingAddressReason.
const podStartedStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-started-awaiting-address
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - type: Initialized
        status: "True"
        lastTransitionTime: {{ $now | Quote }}
      - type: Ready
        status: "False"
        reason: ` + AwaitingAddressReason + `
        lastTransitionTime: {{ $now | Quote }}
      - type: ContainersReady
        status: "False"
        reason: ` + AwaitingAddressReason + `
        lastTransitionTime: {{ $now | Quote }}
      {{ range .spec.readinessGates }}
      - type: {{ .conditionType | Quote }}
        status: "False"
        reason: ` + AwaitingAddressReason + `
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: false
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
`

// writeReadyAfterAddressStages writes, into the cluster's directory, kwok's
// stages (KwokStagesFile) with kwokReadyStage replaced by podStartedStage,
// and returns the file's path.
func (c *Cluster) writeReadyAfterAddressStages() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.BinDir, KwokStagesFile))
	if err != nil {
		return "", err
	}
	var docs []string
	replaced := false
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(doc, "\n  name: "+kwokReadyStage+"\n") {
			replaced = true
			continue
		}
		docs = append(docs, doc)
	}
	if !replaced {
		return "", fmt.Errorf("localcluster: %s has no stage named %s to replace", KwokStagesFile, kwokReadyStage)
	}
	docs = append(docs, podStartedStage)
	path := filepath.Join(c.Dir, "stages-ready-after-address.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600)
}
