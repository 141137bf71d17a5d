package realnode

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
)

// restartLogLines is how much of a restarted container's previous log a
// failure shows: enough for the last errors and the drain or exit lines.
const restartLogLines = 40

// kubeletWhy are the kubelet's log lines that say why it stopped or
// restarted a container: failed probes, kills, OOM and back-offs.
var kubeletWhy = regexp.MustCompile(`(?i)probe failed|killing container|oom|back-off|ContainerDied`)

// restartEvidence says why each elasti container that restarted, or has a
// terminated last state, stopped: the kubelet's record of the last
// termination (reason, exit code, times, message), the pod's Events
// (Unhealthy, Killing, OOMKilling, BackOff), the previous container's last
// log lines, and the kubelet's own lines about probes and kills. A
// restart seen by checkElastiPods or checkNoOOMKill then explains itself:
// an exit code 0 after a failed liveness probe is a kubelet kill that
// drained, 137 with OOMKilled is the memory limit, 1 is the process's own
// exit and its log says why. Empty when no elasti container restarted.
func (b *bed) restartEvidence(ctx context.Context) string {
	pods, err := b.kube.CoreV1().Pods(elastiNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\nrestart evidence: " + err.Error()
	}
	var out bytes.Buffer
	found := false
	for _, p := range pods.Items {
		restarted := false
		for _, st := range p.Status.ContainerStatuses {
			last := st.LastTerminationState.Terminated
			if st.RestartCount == 0 && last == nil {
				continue
			}
			restarted, found = true, true
			fmt.Fprintf(&out, "\n=== %s container %s: %d restarts", p.Name, st.Name, st.RestartCount)
			if last != nil {
				fmt.Fprintf(&out, "; last terminated: reason=%s exitCode=%d signal=%d started=%s finished=%s message=%q",
					last.Reason, last.ExitCode, last.Signal, last.StartedAt.UTC().Format("15:04:05"), last.FinishedAt.UTC().Format("15:04:05"), last.Message)
			}
			logs, err := b.kube.CoreV1().Pods(elastiNamespace).GetLogs(p.Name, &corev1.PodLogOptions{
				Container: st.Name, Previous: true, TailLines: ptr.To[int64](restartLogLines),
			}).DoRaw(ctx)
			if err != nil {
				fmt.Fprintf(&out, "\n--- previous log: %v", err)
			} else {
				fmt.Fprintf(&out, "\n--- previous container's last %d log lines:\n%s", restartLogLines, logs)
			}
		}
		if !restarted {
			continue
		}
		events, err := b.kube.CoreV1().Events(elastiNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", p.Name).String(),
		})
		if err != nil {
			fmt.Fprintf(&out, "\n--- events of %s: %v", p.Name, err)
			continue
		}
		fmt.Fprintf(&out, "\n--- events of %s:", p.Name)
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeNormal && (ev.Reason == "Scheduled" || ev.Reason == "Pulled" || ev.Reason == "Created" || ev.Reason == "Started") && ev.Count <= 1 {
				continue
			}
			fmt.Fprintf(&out, "\n  %s %s %s x%d: %s", ev.LastTimestamp.UTC().Format("15:04:05"), ev.Type, ev.Reason, max(ev.Count, 1), ev.Message)
		}
	}
	if !found {
		return ""
	}
	var why []string
	for _, l := range strings.Split(localcluster.Tail(realnode.KubeletLog(), 20000), "\n") {
		if kubeletWhy.MatchString(l) && strings.Contains(l, elastiNamespace+"/") {
			why = append(why, l)
		}
	}
	if len(why) > 30 {
		why = why[len(why)-30:]
	}
	fmt.Fprintf(&out, "\n--- the kubelet on elasti's containers (probes, kills, OOM):\n%s", strings.Join(why, "\n"))
	return out.String()
}
