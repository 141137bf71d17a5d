package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/elasti-dev/elasti/pkg/localcluster"
)

// tools are the executables the node runs.
type tools struct {
	kubelet, containerd, ctr, runc, ip string
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins
// (hack/build-cluster-bins.sh installs it).
const cniBinDir = "/usr/lib/cni"

// findTools finds kubelet in the cluster's binaries and the rest on the
// host, where hack/build-cluster-bins.sh installs them.
func findTools(binDir string) (tools, error) {
	t := tools{kubelet: filepath.Join(binDir, localcluster.KubeletBinary)}
	var missing []string
	if _, err := os.Stat(t.kubelet); err != nil {
		missing = append(missing, t.kubelet)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"containerd", &t.containerd}, {"ctr", &t.ctr}, {"runc", &t.runc}, {"ip", &t.ip}} {
		if p := lookPath(f.name); p != "" {
			*f.dst = p
		} else {
			missing = append(missing, f.name)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, plugin))
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("realnode: missing %s; hack/build-cluster-bins.sh builds kubelet and installs containerd, runc and containernetworking-plugins",
			strings.Join(missing, ", "))
	}
	return t, nil
}

// lookPath is exec.LookPath that also looks in sbin, which a PATH may lack.
func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// run runs a short command and returns its stdout; the error carries stderr.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// process is a daemon the node started, logging to a file in Dir.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// startProcess starts bin in a process group of its own, which the kernel
// kills when the test binary dies (Pdeathsig). containerd's shims leave
// that group on purpose; cleanup finds them by their socket.
func (n *Node) startProcess(name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(Dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("realnode: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitFor polls check every 200 ms until it succeeds, p exits or ctx ends;
// the error names the last check's failure and the end of p's log.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	var last error
	for {
		if p.exited() {
			return p.failure(fmt.Errorf("exited: %v", p.waitErr))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Errorf("%w; last check: %v", ctx.Err(), last))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *process) failure(cause error) error {
	return fmt.Errorf("realnode: %s did not become ready: %w\n--- last lines of %s ---\n%s", p.name, cause, p.logPath, Tail(p.logPath, 30))
}

// Tail returns the last n lines of a file, or why it cannot.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
