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

// Process is one component of the bed run as a child process with its own
// log file: the control plane's, and a real node's containerd and kubelet
// (package realnode).
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

// StartProcess launches bin with args in dir, logging to dir/<name>.log, in
// a process group of its own that the kernel kills when this process dies.
func StartProcess(dir, name, bin string, args ...string) (*Process, error) {
	return startProcess(dir, name, bin, args, false)
}

// startProcess launches bin with args, logging to dir/<name>.log. With
// detach the process gets its own session and outlives this one (make
// cluster-up); otherwise the kernel kills it when this process dies, so a
// crashed or timed-out test leaves no orphans.
func startProcess(dir, name, bin string, args []string, detach bool) (*Process, error) {
	return launch(dir, name, bin, args, detach, os.O_TRUNC)
}

// relaunch starts p's command again, after it has exited: same binary,
// arguments, directory and session. It appends to p's log, so the lines of
// the run that ended (how it died) stay beside those of the new one.
func (p *Process) relaunch() (*Process, error) {
	if !p.Exited() {
		return nil, fmt.Errorf("%s is still running", p.name)
	}
	detach := p.cmd.SysProcAttr != nil && p.cmd.SysProcAttr.Setsid
	return launch(p.cmd.Dir, p.name, p.cmd.Path, p.cmd.Args[1:], detach, os.O_APPEND)
}

// launch is startProcess; logMode (os.O_TRUNC or os.O_APPEND) says what
// happens to an existing log.
func launch(dir, name, bin string, args []string, detach bool, logMode int) (*Process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|logMode, 0o644)
	if err != nil {
		return nil, err
	}
	if logMode == os.O_APPEND {
		fmt.Fprintf(logFile, "\n--- %s restarted at %s ---\n", name, time.Now().Format(time.RFC3339Nano))
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
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
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

// kill sends sig to the process group and waits until the process has
// exited. SIGTERM is a graceful shutdown, followed by SIGKILL after grace;
// SIGKILL is a crash: nothing is drained or closed cleanly.
func (p *Process) kill(sig syscall.Signal, grace time.Duration) error {
	switch sig {
	case syscall.SIGTERM:
		p.Stop(grace)
	case syscall.SIGKILL:
		if !p.Exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	default:
		return fmt.Errorf("stop %s with %v: only SIGTERM and SIGKILL are supported", p.name, sig)
	}
	return nil
}

// failure describes why a component did not come up, with the end of its log.
func (p *Process) failure(cause error) error {
	msg := fmt.Sprintf("%s did not become ready: %v", p.name, cause)
	if p.Exited() {
		msg += fmt.Sprintf(" (exited: %v)", p.waitErr)
	}
	return fmt.Errorf("%s\n--- last lines of %s ---\n%s", msg, p.logPath, Tail(p.logPath, 25))
}

// Tail returns the last n lines of the file at path, or why it cannot.
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

// WaitFor polls check until it succeeds, the process dies, or ctx ends.
func WaitFor(ctx context.Context, p *Process, check func(context.Context) error) error {
	var last error
	for {
		if p != nil && p.Exited() {
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
