package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// CountScaleWrites counts writes to a target's scale subresource in the
// apiserver's audit log.
func CountScaleWrites(t testing.TB, namespace, resource, name string) int {
	t.Helper()
	n := 0
	EachAuditEvent(t, func(ev AuditEvent) {
		r := ev.ObjectRef
		if ev.Stage == "ResponseComplete" && (ev.Verb == "patch" || ev.Verb == "update") &&
			r.Resource == resource && r.Namespace == namespace && r.Name == name && r.Subresource == "scale" {
			n++
		}
	})
	return n
}

// WriteVerbs are the verbs that change what the apiserver stores.
var WriteVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// Writes lists, from the audit log, every write by clients whose user agent
// byAgent accepts, as "verb resource[/subresource] namespace/name". The
// cluster's audit policy leaves out Leases and Events (see
// test/localcluster), so those are never among them.
func Writes(t testing.TB, byAgent func(userAgent string) bool) []string {
	t.Helper()
	var out []string
	EachAuditEvent(t, func(ev AuditEvent) {
		if ev.Stage != "ResponseComplete" || !slices.Contains(WriteVerbs, ev.Verb) || !byAgent(ev.UserAgent) {
			return
		}
		r := ev.ObjectRef
		res := r.Resource
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", ev.Verb, res, r.Namespace, r.Name))
	})
	return out
}

// AuditEvent is the part of an apiserver audit event the tests read.
type AuditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	// StageTimestamp is when the event's stage was reached, in
	// microseconds.
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
	ObjectRef      struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// EachAuditEvent calls f for every event in the cluster's audit log so far,
// oldest first, including the backups the apiserver rotated out
// (--audit-log-maxsize): a large fleet fills more than one file.
func EachAuditEvent(t testing.TB, f func(AuditEvent)) {
	t.Helper()
	current := clustertest.Get(t).AuditLog
	// Backups are named <name>-<timestamp>.log: in order by name.
	backups, err := filepath.Glob(strings.TrimSuffix(current, ".log") + "-*.log")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(backups)
	for _, path := range append(backups, current) {
		eachAuditEventIn(t, path, f)
	}
}

func eachAuditEventIn(t testing.TB, path string, f func(AuditEvent)) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev AuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			f(ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// ColdStartWrites lists, from the audit log, the writes since since that
// a cold start of Service svc served by pod (every pod named after svc,
// as a Deployment of its name names them, when pod is "") waits on,
// oldest first, each with its time after since and its writer: the
// target's scale-ups and scale-downs (a Deployment named svc, its
// ReplicaSets), the ElastiService named svc, the pod's binding, status
// (the kubelet's Ready) and deletion, the Service's own EndpointSlices
// (the EndpointSlice controller's, named after the Service) and its
// resolver slice. It is a slow or failed cold start's evidence: where the
// time between the wake and the slice that lists a pod Ready went, and
// whether anyone scaled the target down meanwhile. A pod's create is not
// among them: the audit log names no pod made from generateName.
func ColdStartWrites(t testing.TB, namespace, svc, pod string, since time.Time) []string {
	t.Helper()
	var out []string
	EachAuditEvent(t, func(ev AuditEvent) {
		r := ev.ObjectRef
		if ev.Stage != "ResponseComplete" || !slices.Contains(WriteVerbs, ev.Verb) || r.Namespace != namespace || ev.StageTimestamp.Time.Before(since) {
			return
		}
		switch {
		case r.Name == "":
			return
		case r.Resource == "pods" && (r.Name == pod || pod == "" && strings.HasPrefix(r.Name, svc+"-")):
		case r.Resource == "endpointslices" && (strings.HasPrefix(r.Name, svc+"-") || r.Name == names.ResolverSlice(svc)):
		case (r.Resource == "deployments" || r.Resource == "elastiservices") && r.Name == svc:
		case r.Resource == "replicasets" && strings.HasPrefix(r.Name, svc+"-"):
		default:
			return
		}
		res := r.Resource
		if r.Subresource != "" {
			res += "/" + r.Subresource
		}
		agent, _, _ := strings.Cut(ev.UserAgent, " ")
		out = append(out, fmt.Sprintf("+%s %s %s %s by %s", ev.StageTimestamp.Sub(since).Round(time.Millisecond), ev.Verb, res, r.Name, agent))
	})
	return out
}

// GrepTail is the last n lines of text that contain s, for evidence.
func GrepTail(text, s string, n int) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			lines = append(lines, l)
		}
	}
	lines = lines[max(len(lines)-n, 0):]
	if len(lines) == 0 {
		return "(none)\n"
	}
	return strings.Join(lines, "\n") + "\n"
}

// OpenWatches counts the watches held open right now by clients whose user
// agent ends with agentSuffix, from the apiserver's audit log: a watch is
// open from its ResponseStarted stage until its ResponseComplete. Unlike the
// apiserver's own gauge, it ignores every other component's watches.
func OpenWatches(t testing.TB, agentSuffix string) int {
	t.Helper()
	open := map[string]bool{}
	EachAuditEvent(t, func(ev AuditEvent) {
		if ev.Verb != "watch" || !strings.HasSuffix(ev.UserAgent, agentSuffix) {
			return
		}
		switch ev.Stage {
		case "ResponseStarted":
			open[ev.AuditID] = true
		case "ResponseComplete", "Panic":
			delete(open, ev.AuditID)
		}
	})
	return len(open)
}
