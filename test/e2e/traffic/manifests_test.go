package traffic

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// brokenHold is how long a broken copy of the manifests is watched never
// becoming Ready: past the probes' initial delay and two periods.
const brokenHold = 15 * time.Second

// TestBrokenManifestsNeverBecomeReady proves that the bed runs the
// manifests, not a stand-in: a copy of manifests/ in a namespace of its own,
// with the operator's ElastiService read rule removed and the resolver's
// readiness probe on the wrong port, runs both pods, and neither ever
// becomes Ready. (The real manifests' pods became Ready when the bed
// started.)
func TestBrokenManifestsNeverBecomeReady(t *testing.T) {
	b := testBed(t)
	ctx := t.Context()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := "elasti-broken-" + hex.EncodeToString(suffix)

	dir := t.TempDir()
	var files []string
	for _, f := range []string{"10-rbac.yaml", "11-resolver-rbac.yaml", "20-operator.yaml", "30-resolver.yaml"} {
		data, err := os.ReadFile(filepath.Join(b.root, "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		// Its own namespace and cluster-scoped names, so it cannot touch
		// the real installation.
		s = strings.ReplaceAll(s, "namespace: elasti\n", "namespace: "+ns+"\n")
		s = strings.ReplaceAll(s, "name: elasti-", "name: "+ns+"-")
		s = strings.ReplaceAll(s, "serviceAccountName: elasti-", "serviceAccountName: "+ns+"-")
		// Its Lease too, so it never contends with the real operator.
		s = strings.ReplaceAll(s, "- name: ELASTI_OPERATOR_NAMESPACE\n              value: elasti\n",
			"- name: ELASTI_OPERATOR_NAMESPACE\n              value: "+ns+"\n")
		switch f {
		case "10-rbac.yaml":
			rule := "  - apiGroups: [\"elasti.truefoundry.com\"]\n    resources: [\"elastiservices\"]\n    verbs: [\"get\", \"list\", \"watch\"]\n"
			if !strings.Contains(s, rule) {
				t.Fatalf("manifests/10-rbac.yaml no longer has the rule this test removes:\n%s", rule)
			}
			s = strings.Replace(s, rule, "", 1)
		case "20-operator.yaml":
			if !strings.Contains(s, "value: "+ns+"\n") {
				t.Fatal("manifests/20-operator.yaml no longer sets ELASTI_OPERATOR_NAMESPACE the way this test moves it")
			}
		case "30-resolver.yaml":
			probe := "readinessProbe:\n            httpGet:\n              path: /readyz\n              port: 8013"
			if !strings.Contains(s, probe) {
				t.Fatalf("manifests/30-resolver.yaml no longer has the probe this test breaks:\n%s", probe)
			}
			// 8019: nothing listens there (8014 serves the route table).
			s = strings.Replace(s, probe, strings.Replace(probe, "8013", "8019", 1), 1)
		}
		path := filepath.Join(dir, f)
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	if _, err := b.cluster.Kubectl(ctx, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range files {
			_, _ = b.cluster.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-f", f)
		}
		_, _ = b.cluster.Kubectl(ctx, "delete", "namespace", ns, "--wait=false")
	})
	for _, f := range files {
		if _, err := b.cluster.Kubectl(ctx, "apply", "-f", f); err != nil {
			t.Fatal(err)
		}
	}

	// Both pods must be running (so it is the probes that fail, not a
	// crash or a missing binary), and stay unready.
	running := map[string]bool{}
	deadline := time.Now().Add(readyTimeout)
	for len(running) < 2 && time.Now().Before(deadline) {
		for _, p := range b.pods(t, ns) {
			if p.Status.Phase == corev1.PodRunning {
				running[p.Labels["app.kubernetes.io/name"]+p.Labels["app"]] = true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(running) < 2 {
		t.Fatalf("the broken copy's pods did not both start: %v", describePods(b.pods(t, ns)))
	}
	for end := time.Now().Add(brokenHold); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for _, p := range b.pods(t, ns) {
			if testenv.PodReady(&p) {
				t.Fatalf("pod %s became Ready though its manifest is broken:\n%s", p.Name, b.Node.Logs(ns, "", 20))
			}
		}
	}
	logs := b.Node.Logs(ns, ns+"-operator", 200)
	if !strings.Contains(logs, "forbidden") || !strings.Contains(logs, "elastiservices") {
		t.Errorf("the operator without its ElastiService rule should report the apiserver's refusal; its log:\n%s", logs)
	}
}

func (b *bed) pods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list, err := b.Kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func describePods(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, realnet.DescribePod(&p))
	}
	return out
}
