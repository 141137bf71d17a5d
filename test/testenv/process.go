package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/procnode"
)

// Leader election timing of operator processes: short, so that failover
// and a lost lease happen within a test's time.
const (
	LeaseDuration = 3 * time.Second
	RenewDeadline = 2 * time.Second
	RetryPeriod   = 500 * time.Millisecond
)

// SteadyLease are the lease flags (15 s, 10 s to renew, 2 s between
// tries; the operator's own defaults are longer still, 60 s, 45 s and
// 5 s) for a process that only its test may end, by a signal: the short
// lease's 2 s renew deadline is shorter than the apiserver's answers on a
// loaded machine, and such a process loses its lease and exits in the
// middle of the test (CI, 3 Dec 2026: TestSIGTERMDuringABurstConverges
// waited a minute on no operator, and so did the chaos test). A graceful
// exit releases the lease, so the next one leads at once; after a
// SIGKILL the next one waits out the 15 s.
var SteadyLease = []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// OperatorBinary builds cmd/elasti-operator once per test binary.
func OperatorBinary(t testing.TB) string {
	t.Helper()
	bin, err := operatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func operatorBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := localcluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "elasti-operator-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// Tests hard-link it into their own directories, so it outlives
		// any one test: the package removes it when its tests are done.
		clustertest.AfterTests(func() { _ = os.RemoveAll(dir) })
		builtBin = filepath.Join(dir, "elasti-operator")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtBin, "./cmd/elasti-operator")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/elasti-operator: %v\n%s", err, out)
		}
	})
	return builtBin, buildErr
}

// OperatorProcess is one elasti-operator replica run as a real process.
type OperatorProcess struct {
	Name   string
	Health string // base URL of /healthz and /readyz
	Scale  string // URL of the scale endpoint
	Log    string // its stdout and stderr

	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState
}

// StartOperatorProcess runs a replica named name until the test ends (its
// binary is a copy under that name, so the apiserver's audit log tells
// replicas apart by user agent), with leader election on a Lease in the
// Env's namespace. Later args override earlier ones. A failed test shows
// the end of its log.
func (e *Env) StartOperatorProcess(name string, args ...string) *OperatorProcess {
	e.T.Helper()
	p, err := e.LaunchOperatorProcess(e.T.TempDir(), name, args...)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.done
		if e.T.Failed() {
			e.T.Logf("--- %s log (last 40 lines) ---\n%s", name, p.LastLines(40))
		}
	})
	return p
}

// LaunchOperatorProcess is StartOperatorProcess for a caller that owns the
// process, such as a supervisor goroutine: it is safe from any goroutine,
// keeps the binary and the log in dir, and leaves stopping the process to
// the caller.
func (e *Env) LaunchOperatorProcess(dir, name string, args ...string) (*OperatorProcess, error) {
	bin := filepath.Join(dir, name)
	built, err := operatorBinary()
	if err != nil {
		return nil, err
	}
	if err := linkOrCopy(built, bin); err != nil {
		return nil, err
	}
	ports, err := loopbackPorts(2)
	if err != nil {
		return nil, err
	}
	p := &OperatorProcess{
		Name:   name,
		Health: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		Scale:  fmt.Sprintf("http://127.0.0.1:%d/informer/incoming-request", ports[1]),
		Log:    filepath.Join(dir, name+".log"),
		done:   make(chan struct{}),
	}
	p.cmd = exec.Command(bin, append(operatorArgs(e, clustertest.Get(e.T).Kubeconfig, ports), args...)...)
	return p, p.start()
}

// operatorArgs are an operator process's flags: the Env's namespace, the
// stand-in resolver, loopback ports[0] for probes and ports[1] for the
// scale endpoint, and the short lease.
func operatorArgs(e *Env, kubeconfig string, ports []int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect",
		"--leader-elect-namespace=" + e.NS,
		"--leader-elect-lease-duration=" + LeaseDuration.String(),
		"--leader-elect-renew-deadline=" + RenewDeadline.String(),
		"--leader-elect-retry-period=" + RetryPeriod.String(),
		"--watch-namespace=" + e.NS,
		"--resolver-namespace=" + e.NS, "--resolver-service=" + ResolverName,
		fmt.Sprintf("--resolver-proxy-port=%d", ResolverProxyPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--scale-server-bind-address=127.0.0.1:%d", ports[1]),
		"--metrics-bind-address=0",
		"--polling-interval=1h",
		"-v=2",
	}
}

func (p *OperatorProcess) start() error {
	logFile, err := os.Create(p.Log)
	if err != nil {
		return err
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// The kernel kills it if the test binary dies, so no run leaves one.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A copy just written may still be open for writing in a child that
	// another goroutine forked meanwhile, until that child execs: exec then
	// fails with ETXTBSY for a moment (golang.org/issue/22315).
	for try := 0; ; try++ {
		err = p.cmd.Start()
		if !errors.Is(err, syscall.ETXTBSY) || try == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
		p.cmd = rebuilt(p.cmd)
	}
	if err != nil {
		logFile.Close()
		return err
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		logFile.Close()
		close(p.done)
	}()
	return nil
}

// Signal sends sig unless the process has exited.
func (p *OperatorProcess) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

// Done is closed once the process has exited.
func (p *OperatorProcess) Done() <-chan struct{} { return p.done }

// State is how the process exited; read it only after Done.
func (p *OperatorProcess) State() *os.ProcessState { return p.state }

// Pid is the process's id.
func (p *OperatorProcess) Pid() int { return p.cmd.Process.Pid }

// Ready reports whether /readyz answers 200: caches synced and leading.
func (p *OperatorProcess) Ready() bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(p.Health + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// LastLines is the end of the process's log.
func (p *OperatorProcess) LastLines(n int) string { return procnode.TailFile(p.Log, n) }

// loopbackPorts picks n distinct free loopback ports, holding them all
// until it has them, then releases them for the operator to bind.
func loopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// linkOrCopy makes dst the file src: a hard link where both are on one file
// system, else a copy.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// rebuilt is a fresh, unstarted copy of cmd: an exec.Cmd cannot be started
// twice, even after Start failed.
func rebuilt(cmd *exec.Cmd) *exec.Cmd {
	c := exec.Command(cmd.Path, cmd.Args[1:]...)
	c.Env, c.Dir = cmd.Env, cmd.Dir
	c.Stdin, c.Stdout, c.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
	c.SysProcAttr = cmd.SysProcAttr
	return c
}
