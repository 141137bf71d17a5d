package testenv

import (
	"fmt"
	"strings"
	"testing"
)

func TestOpenWatchesSumsWatchRequests(t *testing.T) {
	const exposition = `# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 3
apiserver_longrunning_requests{component="apiserver",group="apps",resource="deployments",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="resource",subresource="log",verb="CONNECT",version="v1"} 7
# HELP apiserver_longrunning_other Not counted.
# TYPE apiserver_longrunning_other gauge
apiserver_longrunning_other{verb="WATCH"} 11
`
	got, err := openWatches(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if got != 5 {
		t.Errorf("openWatches = %d, want 5", got)
	}
	if _, err := openWatches(strings.NewReader("apiserver_longrunning_requests{verb=\"WATCH\" 1\n")); err == nil {
		t.Error("a malformed exposition parsed")
	}
}

func TestQueuesSettledNeedsEveryKeyDone(t *testing.T) {
	exposition := func(esAdds, esDone, esDepth int) string {
		var b strings.Builder
		b.WriteString("# TYPE workqueue_adds_total counter\n# TYPE workqueue_depth gauge\n# TYPE workqueue_work_duration_seconds histogram\n")
		for _, q := range OperatorQueues {
			adds, done, depth := 3, 3, 0
			if q == "elastiservice" {
				adds, done, depth = esAdds, esDone, esDepth
			}
			fmt.Fprintf(&b, "workqueue_adds_total{name=%q} %d\nworkqueue_depth{name=%q} %d\n", q, adds, q, depth)
			fmt.Fprintf(&b, "workqueue_work_duration_seconds_bucket{name=%q,le=\"+Inf\"} %d\n", q, done)
			fmt.Fprintf(&b, "workqueue_work_duration_seconds_sum{name=%q} 0.1\nworkqueue_work_duration_seconds_count{name=%q} %d\n", q, q, done)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name              string
		adds, done, depth int
		elastiServices    int
		want              bool
	}{
		{"all done", 42, 42, 0, 40, true},
		{"one still syncing", 42, 41, 0, 40, false},
		{"one waiting", 42, 41, 1, 40, false},
		{"not every ElastiService listed yet", 30, 30, 0, 40, false},
	} {
		families, err := ScrapeFamilies(strings.NewReader(exposition(tc.adds, tc.done, tc.depth)))
		if err != nil {
			t.Fatal(err)
		}
		if got, seen := QueuesSettled(families, tc.elastiServices); got != tc.want {
			t.Errorf("%s: QueuesSettled = %v (%s), want %v", tc.name, got, seen, tc.want)
		}
	}
}
