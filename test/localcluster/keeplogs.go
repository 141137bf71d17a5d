package localcluster

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
