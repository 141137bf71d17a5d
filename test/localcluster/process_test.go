package localcluster

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitLog waits until the log at path holds want n times.
func waitLog(t *testing.T, path, want string, n int) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), want) >= n {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q %d times:\n%s", path, want, n, b)
		}
	}
}

// A killed component starts again with the same command, and its log keeps
// the lines of the run that ended.
func TestRelaunchAfterSIGKILLKeepsTheCommandAndTheLog(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, "comp", "/bin/sh", []string{"-c", "echo started; exec sleep 60"}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	log := filepath.Join(dir, "comp.log")
	waitLog(t, log, "started", 1)
	if _, err := p.relaunch(); err == nil {
		t.Fatal("relaunch of a running process succeeded")
	}
	if err := p.kill(syscall.SIGHUP, time.Second); err == nil {
		t.Fatal("kill with SIGHUP succeeded; only SIGTERM and SIGKILL are offered")
	}
	if err := p.kill(syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("the process has not exited after kill returned")
	}

	q, err := p.relaunch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop(time.Second) })
	if q.cmd.Process.Pid == p.cmd.Process.Pid || !slices.Equal(q.cmd.Args, p.cmd.Args) || q.cmd.Dir != p.cmd.Dir {
		t.Errorf("relaunched as pid %d %q in %s; was pid %d %q in %s",
			q.cmd.Process.Pid, q.cmd.Args, q.cmd.Dir, p.cmd.Process.Pid, p.cmd.Args, p.cmd.Dir)
	}
	if !q.cmd.SysProcAttr.Setpgid || q.cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("relaunched with %+v; a component of a test cluster dies with the test", q.cmd.SysProcAttr)
	}
	out := waitLog(t, log, "started", 2)
	if !strings.Contains(out, "--- comp restarted at ") {
		t.Errorf("the log does not mark the restart:\n%s", out)
	}
}

// SIGTERM is a graceful stop, which a process that ignores it does not
// get to delay past the grace period.
func TestKillSIGTERMFallsBackToSIGKILL(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess(dir, "stubborn", "/bin/sh", []string{"-c", `trap "" TERM; echo trapped; sleep 60`}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.kill(syscall.SIGKILL, 0) })
	waitLog(t, filepath.Join(dir, "stubborn.log"), "trapped", 1)
	start := time.Now()
	if err := p.kill(syscall.SIGTERM, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("the process has not exited after kill returned")
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("a process ignoring SIGTERM stopped after %s, before the grace period", took)
	}
}

// Only a cluster this process started can have its apiserver restarted: a
// loaded one may be shared with other test binaries.
func TestRestartAPIServerOfALoadedClusterIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte(`{"dir":"`+dir+`","pids":{"kube-apiserver":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StopAPIServer(syscall.SIGKILL); !errors.Is(err, errNotStartedHere) {
		t.Errorf("StopAPIServer: %v, want %v", err, errNotStartedHere)
	}
	if err := c.StartAPIServer(t.Context()); !errors.Is(err, errNotStartedHere) {
		t.Errorf("StartAPIServer: %v, want %v", err, errNotStartedHere)
	}
}
