package apiserver

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/test/testenv"
)

// restartDelay is how long the supervisor waits before starting an
// operator that exited again: the kubelet restarts a crashed container at
// once the first time, and the test has no time for its growing back-off.
const restartDelay = 500 * time.Millisecond

// supervisor keeps one operator process running, as the kubelet does for
// the operator's pod: whenever the process exits, it records how, and
// starts a new one.
type supervisor struct {
	t    *testing.T
	e    *testenv.Env
	dir  string
	args []string

	current atomic.Pointer[testenv.OperatorProcess]

	mu    sync.Mutex
	procs []*testenv.OperatorProcess // every one started, in order
	exits []exit
	err   error // why a restart failed; the supervisor then gave up

	stop, done chan struct{}
}

// exit is how one operator process ended.
type exit struct {
	name   string
	at     time.Time
	state  *os.ProcessState
	reason string // its "Exiting on error" line, if it logged one
	crash  string // a panic or runtime fault in its log, if any
}

// supervise starts an operator process with args and keeps one running
// until the test ends.
func supervise(t *testing.T, e *testenv.Env, args ...string) *supervisor {
	t.Helper()
	s := &supervisor{t: t, e: e, dir: t.TempDir(), args: args, stop: make(chan struct{}), done: make(chan struct{})}
	first, err := s.launch()
	if err != nil {
		t.Fatal(err)
	}
	s.current.Store(first)
	go s.run()
	t.Cleanup(s.close)
	return s
}

func (s *supervisor) launch() (*testenv.OperatorProcess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.e.LaunchOperatorProcess(s.dir, fmt.Sprintf("elasti-operator-%d", len(s.procs)+1), s.args...)
	if err == nil {
		s.procs = append(s.procs, p)
	}
	return p, err
}

func (s *supervisor) run() {
	defer close(s.done)
	for {
		p := s.current.Load()
		select {
		case <-s.stop:
			return
		case <-p.Done():
		}
		s.record(p)
		select {
		case <-s.stop:
			return
		case <-time.After(restartDelay):
		}
		next, err := s.launch()
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		s.current.Store(next)
	}
}

// record notes how p ended, from its exit status and its log.
func (s *supervisor) record(p *testenv.OperatorProcess) {
	ex := exit{name: p.Name, at: time.Now(), state: p.State()}
	log, _ := os.ReadFile(p.Log)
	for line := range strings.Lines(string(log)) {
		switch {
		case strings.Contains(line, "Exiting on error"):
			ex.reason = strings.TrimSpace(line)
		case strings.HasPrefix(line, "panic:"), strings.HasPrefix(line, "fatal error:"):
			ex.crash = strings.TrimSpace(line)
		}
	}
	s.mu.Lock()
	s.exits = append(s.exits, ex)
	s.mu.Unlock()
}

// leader is the running operator, which may not lead yet.
func (s *supervisor) leader() *testenv.OperatorProcess { return s.current.Load() }

// exited returns the exits so far.
func (s *supervisor) exited() []exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]exit(nil), s.exits...)
}

// close stops supervising and kills the running operator; a failed test
// shows the end of every operator's log.
func (s *supervisor) close() {
	close(s.stop)
	<-s.done
	p := s.current.Load()
	p.Signal(syscall.SIGKILL)
	<-p.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		s.t.Errorf("the supervisor could not restart the operator: %v", s.err)
	}
	if !s.t.Failed() {
		return
	}
	for _, p := range s.procs {
		s.t.Logf("--- %s log (last 40 lines) ---\n%s", p.Name, p.LastLines(40))
	}
}

// logsAbout returns the last n lines of every operator's log that mention
// key (namespace/name), each operator's under its name.
func (s *supervisor) logsAbout(key string, n int) string {
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	var out strings.Builder
	for _, p := range procs {
		out.WriteString(linesAbout(p.Log, key, n))
	}
	return out.String()
}

// linesAbout returns the last n lines of the log at path that mention key
// (namespace/name, quoted as klog quotes it), under the log's name.
func linesAbout(path, key string, n int) string {
	log, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("%s: %v\n", filepath.Base(path), err)
	}
	var about []string
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, key+`"`) {
			about = append(about, line)
		}
	}
	return fmt.Sprintf("%s, %d lines about %s, the last %d:\n%s", filepath.Base(path), len(about), key, min(n, len(about)),
		strings.Join(about[max(len(about)-n, 0):], ""))
}
