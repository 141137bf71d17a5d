package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one control-plane component with its log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// startProcess launches bin with args, logging to dir/<name>.log. With
// detach the process gets its own session and outlives this one (make
// cluster-up); otherwise the kernel kills it when this process dies, so a
// crashed or timed-out test leaves no orphans.
func startProcess(dir, name, bin string, args []string, detach bool) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = dir
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
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

// failure describes why a component did not come up, with the end of its log.
func (p *process) failure(cause error) error {
	msg := fmt.Sprintf("%s did not become ready: %v", p.name, cause)
	if p.exited() {
		msg += fmt.Sprintf(" (exited: %v)", p.waitErr)
	}
	return fmt.Errorf("%s\n--- last lines of %s ---\n%s", msg, p.logPath, tail(p.logPath, 25))
}

func tail(path string, n int) string {
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

// killGroup stops a detached process group recorded by pid.
func killGroup(pid int, grace time.Duration) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// waitFor polls check until it succeeds, the process dies, or ctx ends.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	var last error
	for {
		if p != nil && p.exited() {
			return p.failure(errors.New("process exited"))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p != nil {
				return p.failure(fmt.Errorf("%w; last check: %v", ctx.Err(), last))
			}
			return fmt.Errorf("%w; last check: %v", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
