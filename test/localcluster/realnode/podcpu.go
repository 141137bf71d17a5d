package realnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PodCPU is the CPU time the containers of the pod with uid have used on
// the node so far: its cgroup's cpuacct.usage (cgroups v1, which this
// machine has). The kubelet (cgroupfs driver, cgroupsPerQOS) puts a pod's
// cgroup at <cgroupRoot>/kubepods[/<qos>]/pod<uid>. A benchmark reads it
// before and after a round to tell what one process cost the node.
func PodCPU(uid types.UID) (time.Duration, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return 0, err
	}
	want := "pod" + string(uid)
	for _, h := range hierarchies {
		if !strings.Contains(filepath.Base(h), "cpuacct") {
			continue
		}
		var found string
		err := filepath.WalkDir(filepath.Join(h, cgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if d.Name() == want {
				found = p
				return fs.SkipAll
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if found == "" {
			return 0, fmt.Errorf("realnode: no cgroup of pod %s under %s", uid, filepath.Join(h, cgroupRoot))
		}
		b, err := os.ReadFile(filepath.Join(found, "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("realnode: %s: %w", filepath.Join(found, "cpuacct.usage"), err)
		}
		return time.Duration(ns), nil
	}
	return 0, errors.New("realnode: no cpuacct cgroup hierarchy is mounted")
}
