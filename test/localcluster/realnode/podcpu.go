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

// PodCPU is what the containers of the pod with uid have cost the node so
// far: the CPU time they used, their cgroup's cpuacct.usage, and how long
// their threads waited for a CPU while runnable, the second field of each
// thread's /proc/<tid>/schedstat (a thread that has exited no longer
// counts). The kubelet (cgroupfs driver, cgroupsPerQOS) puts a pod's
// cgroup at <cgroupRoot>/kubepods[/<qos>]/pod<uid>, its containers' below.
// A benchmark reads it before and after a round to tell what one process
// cost, and how long it was kept from running by the rest of the node.
func PodCPU(uid types.UID) (used, waited time.Duration, err error) {
	dir, err := podCgroup(uid)
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("realnode: %s: %w", filepath.Join(dir, "cpuacct.usage"), err)
	}
	return time.Duration(ns), runDelay(dir), nil
}

// podCgroup is the cgroup directory of the pod with uid in the cpuacct
// hierarchy (cgroups v1, which this machine has).
func podCgroup(uid types.UID) (string, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return "", err
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
			return "", err
		}
		if found == "" {
			return "", fmt.Errorf("realnode: no cgroup of pod %s under %s", uid, filepath.Join(h, cgroupRoot))
		}
		return found, nil
	}
	return "", errors.New("realnode: no cpuacct cgroup hierarchy is mounted")
}

// runDelay sums how long the threads of every cgroup under dir have
// waited on a run queue: schedstat's second field, in nanoseconds. A
// thread that exits between the listing and the read is left out.
func runDelay(dir string) time.Duration {
	var total time.Duration
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "tasks" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, tid := range strings.Fields(string(b)) {
			st, err := os.ReadFile(filepath.Join("/proc", tid, "schedstat"))
			if err != nil {
				continue
			}
			if f := strings.Fields(string(st)); len(f) >= 2 {
				if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					total += time.Duration(ns)
				}
			}
		}
		return nil
	})
	return total
}
