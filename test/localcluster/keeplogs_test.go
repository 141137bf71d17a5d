package localcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// KeepLogs copies the *.log files under a directory, at their paths, and
// nothing else; without ELASTI_KEEP_LOGS it copies nothing.
func TestKeepLogs(t *testing.T) {
	dir, keep := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"kube-apiserver.log": "api", "pod-logs/ns_web_uid/app/0.log": "app", "state.json": "{}"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Setenv(KeepLogsEnv, "")
	KeepLogs(dir, "cluster")
	if entries, _ := os.ReadDir(keep); len(entries) != 0 {
		t.Fatalf("without %s: %d entries kept, want none", KeepLogsEnv, len(entries))
	}

	t.Setenv(KeepLogsEnv, keep)
	KeepLogs(dir, "cluster")
	for name, want := range map[string]string{"cluster/kube-apiserver.log": "api", "cluster/pod-logs/ns_web_uid/app/0.log": "app"} {
		got, err := os.ReadFile(filepath.Join(keep, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(keep, "cluster", "state.json")); !os.IsNotExist(err) {
		t.Errorf("state.json was kept (%v): only *.log files are", err)
	}
}
