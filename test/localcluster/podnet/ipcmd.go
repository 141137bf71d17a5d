package podnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

const (
	// cmdTimeout bounds one ip command.
	cmdTimeout = 10 * time.Second
	// aptTimeout bounds each apt-get run when iproute2 has to be installed.
	aptTimeout = 5 * time.Minute
)

var (
	ipMu   sync.Mutex
	ipPath string // found or installed iproute2 binary
)

// ipBinary finds iproute2's ip, installing the iproute2 package with apt-get
// when it is missing (apt-get update first only if the plain install fails).
func ipBinary(ctx context.Context, logf func(string, ...any)) (string, error) {
	ipMu.Lock()
	defer ipMu.Unlock()
	if ipPath != "" {
		return ipPath, nil
	}
	if p := findIP(); p != "" {
		ipPath = p
		return p, nil
	}
	logf("podnet: iproute2 is missing, installing it with apt-get")
	var errs []error
	for _, attempt := range [][][]string{
		{{"install", "-y", "iproute2"}},
		{{"update"}, {"install", "-y", "iproute2"}},
	} {
		var err error
		for _, args := range attempt {
			if err = apt(ctx, args...); err != nil {
				break
			}
		}
		if p := findIP(); err == nil && p != "" {
			ipPath = p
			return p, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("podnet: iproute2 (ip) is required and could not be installed with apt-get; "+
		"install it by hand (apt-get install -y iproute2): %w", errors.Join(errs...))
}

// IPPath is iproute2's ip binary (found or installed by Setup), or "ip"
// for PATH lookup before Setup ran.
func IPPath() string {
	ipMu.Lock()
	defer ipMu.Unlock()
	if ipPath != "" {
		return ipPath
	}
	if p := findIP(); p != "" {
		return p
	}
	return "ip"
}

func findIP() string {
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	return ""
}

func apt(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, aptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return nil
}

// runIP runs iproute2 and returns its stdout; the error carries stderr.
// `ip -n NS ...` is iproute2's shorthand for `ip netns exec NS ip ...`.
func runIP(ctx context.Context, args ...string) (string, error) {
	ipMu.Lock()
	p := ipPath
	ipMu.Unlock()
	if p == "" {
		if p = findIP(); p == "" {
			return "", errors.New("podnet: iproute2 (ip) not found")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podnet: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// isGone reports whether an ip error says the object does not exist, which
// teardown treats as done.
func isGone(err error) bool {
	s := err.Error()
	for _, m := range []string{
		"Cannot find device",
		"does not exist",
		"No such process",
		"No such file or directory",
		"No such device",
		"Cannot open network namespace",
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
