package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kwokReadyStage is the name of kwok's own stage that starts a scheduled
// pod: it gives the pod its address and reports it Ready in the same write,
// before anything answers at that address.
const kwokReadyStage = "pod-ready"

// writeReadyAfterAddressStages writes, into the cluster's directory, kwok's
// stages (KwokStagesFile) without kwokReadyStage, and returns the file's
// path: kwok then starts no pod, and the pod network's fake kubelet
// (podnet.Kubelet) starts them instead, address first.
func (c *Cluster) writeReadyAfterAddressStages() (string, error) {
	b, err := os.ReadFile(filepath.Join(c.BinDir, KwokStagesFile))
	if err != nil {
		return "", err
	}
	var docs []string
	dropped := false
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.Contains(doc, "\n  name: "+kwokReadyStage+"\n") {
			dropped = true
			continue
		}
		docs = append(docs, doc)
	}
	if !dropped {
		return "", fmt.Errorf("localcluster: %s has no stage named %s to leave out", KwokStagesFile, kwokReadyStage)
	}
	path := filepath.Join(c.Dir, "stages-ready-after-address.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600)
}
