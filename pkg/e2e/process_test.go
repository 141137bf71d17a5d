package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/pkg/localcluster"
	"github.com/elasti-dev/elasti/pkg/localcluster/clustertest"
	"github.com/elasti-dev/elasti/pkg/testenv"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// operatorBinary builds cmd/elasti-operator once per test binary.
func operatorBinary(t testing.TB) string {
	t.Helper()
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
		builtBin = filepath.Join(dir, "elasti-operator")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/elasti-operator")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/elasti-operator: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// operatorProcess is one elasti-operator replica run as a real process.
type operatorProcess struct {
	name   string
	cmd    *exec.Cmd
	health string // base URL of /healthz and /readyz
	scale  string // URL of the scale endpoint
	log    string
	done   chan struct{}
	state  *os.ProcessState
}

func loopbackPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startOperatorProcess runs a replica named name (its binary is a copy under
// that name, so the apiserver's audit log tells replicas apart by user agent)
// with leader election on a Lease in the test namespace.
func startOperatorProcess(t *testing.T, e *testenv.Env, name string) *operatorProcess {
	t.Helper()
	return startOperatorProcessFor(t, e, name)
}

// startOperatorProcessFor is startOperatorProcess for benchmarks too; later
// args override earlier ones.
func startOperatorProcessFor(t testing.TB, e *testenv.Env, name string, args ...string) *operatorProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	data, err := os.ReadFile(operatorBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	healthPort, scalePort := loopbackPort(t), loopbackPort(t)
	p := &operatorProcess{
		name:   name,
		health: fmt.Sprintf("http://127.0.0.1:%d", healthPort),
		scale:  fmt.Sprintf("http://127.0.0.1:%d/informer/incoming-request", scalePort),
		log:    filepath.Join(t.TempDir(), name+".log"),
		done:   make(chan struct{}),
	}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin,
		"--kubeconfig="+clustertest.Get(t).Kubeconfig,
		"--leader-elect",
		"--leader-elect-namespace="+e.NS,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--watch-namespace="+e.NS,
		"--resolver-namespace="+e.NS, "--resolver-service="+testenv.ResolverName,
		fmt.Sprintf("--resolver-proxy-port=%d", testenv.ResolverProxyPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--scale-server-bind-address=127.0.0.1:%d", scalePort),
		"--metrics-bind-address=0",
		"--polling-interval=1h",
		"-v=2",
	)
	p.cmd.Args = append(p.cmd.Args, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("--- %s log (last 40 lines) ---\n%s", name, lastLines(string(b), 40))
			}
		}
	})
	return p
}

func (p *operatorProcess) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *operatorProcess) ready() bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get(p.health + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writesBy counts writes in namespace made by clients whose user agent
// starts with agent, from the apiserver's audit log.
func writesBy(t testing.TB, namespace, agent string) int {
	t.Helper()
	n := 0
	testenv.EachAuditEvent(t, func(ev testenv.AuditEvent) {
		if ev.Stage == "ResponseComplete" && ev.Verb != "watch" && ev.ObjectRef.Namespace == namespace && strings.HasPrefix(ev.UserAgent, agent+"/") {
			n++
		}
	})
	return n
}
