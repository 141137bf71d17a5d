package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// KeepLogsEnv names a directory to which a cluster's and a real node's
// logs (the components', the audit log, the pods') are copied before
// their directories are removed, so a slow or failed run can be read
// afterwards: the gates quote only their slice of them.
const KeepLogsEnv = "ELASTI_KEEP_LOGS"

// KeepLogs copies every *.log file under dir to $ELASTI_KEEP_LOGS/as,
// keeping their paths, when that variable is set. It is best effort: a
// file it cannot copy is skipped, since it runs on the way out.
func KeepLogs(dir, as string) {
	keep := os.Getenv(KeepLogsEnv)
	if keep == "" {
		return
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".log") || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return nil
		}
		_ = copyFile(path, filepath.Join(keep, as, rel))
		return nil
	})
}

// copyFile copies from to to, streaming: the audit log alone may be
// hundreds of MiB (--audit-log-maxsize).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// watchMetrics are the apiserver series that say whether a watch was cut
// for its client being too slow (the watch cache terminates a watcher
// whose buffer stays full: apiserver_terminated_watchers_total) and how
// much each resource's watchers were sent: the evidence of a client whose
// informer fell behind, which the audit log shows only as short watches.
var watchMetrics = []string{"apiserver_terminated_watchers_total", "apiserver_watch_events_total", "apiserver_watch_events_sizes_sum"}

// keepWatchMetrics writes the apiserver's watchMetrics to
// apiserver-metrics.log in the cluster's directory, for KeepLogs to keep,
// when ELASTI_KEEP_LOGS is set; otherwise it reads nothing. Best effort,
// on the way out: a kubeconfig it cannot read is skipped, not a panic as
// in RESTConfig.
func (c *Cluster) keepWatchMetrics() {
	if os.Getenv(KeepLogsEnv) == "" {
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return
	}
	var kept bytes.Buffer
	for sc := bufio.NewScanner(bytes.NewReader(raw)); sc.Scan(); {
		for _, m := range watchMetrics {
			if strings.HasPrefix(sc.Text(), m) {
				kept.WriteString(sc.Text() + "\n")
			}
		}
	}
	_ = os.WriteFile(filepath.Join(c.Dir, "apiserver-metrics.log"), kept.Bytes(), 0o644)
}
