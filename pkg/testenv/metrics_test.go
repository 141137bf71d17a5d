package testenv

import (
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
