package triggers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// healthMaxAge is how long an uptime answer is shared. A poll over a large
// fleet can last minutes, since each scale-down first waits for the
// resolver to be put in front; a Prometheus that restarts meanwhile must
// be seen as such by the evaluations after it, whose queries would read
// its gap as idle.
const healthMaxAge = 2 * time.Second

// HealthMemo shares uptime checks among the evaluations of one poll. A fleet
// whose triggers use one Prometheus then asks it whether it has been up a
// few times per poll, not once per ElastiService: at 10,000 that halves
// the queries the poller sends. Callers asking for a check under way wait
// for its answer; an answer, failures included, is shared for
// healthMaxAge. Use a new memo for each poll.
type HealthMemo struct {
	mu     sync.Mutex
	checks map[string]*healthCheck
}

type healthCheck struct {
	done    chan struct{}
	at      time.Time
	healthy bool
	err     error
}

// healthy returns the answer of check for key, running it unless a fresh
// answer exists or is on its way; server names the Prometheus in an error.
func (m *HealthMemo) healthy(ctx context.Context, key, server string, check func() (bool, error)) (bool, error) {
	m.mu.Lock()
	if m.checks == nil {
		m.checks = map[string]*healthCheck{}
	}
	c, found := m.checks[key]
	if found && c.stale() {
		found = false
	}
	if !found {
		c = &healthCheck{done: make(chan struct{})}
		m.checks[key] = c
	}
	m.mu.Unlock()
	if !found {
		return m.run(key, c, check)
	}
	select {
	case <-c.done:
		return c.healthy, c.err
	case <-ctx.Done():
		reason := ReasonCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = ReasonTimeout
		}
		return false, &Error{Reason: reason, Err: fmt.Errorf("waiting for the health check of prometheus at %s: %w", server, ctx.Err())}
	}
}

// run answers c. A check cut short by its caller's cancellation says
// nothing about Prometheus, so the next caller asks again.
func (m *HealthMemo) run(key string, c *healthCheck, check func() (bool, error)) (bool, error) {
	defer close(c.done)
	c.healthy, c.err = check()
	c.at = time.Now()
	if ReasonOf(c.err) == ReasonCanceled {
		m.mu.Lock()
		if m.checks[key] == c {
			delete(m.checks, key)
		}
		m.mu.Unlock()
	}
	return c.healthy, c.err
}

// stale reports whether c's answer is too old to share. A check still
// under way is not. Call with the memo's lock held.
func (c *healthCheck) stale() bool {
	select {
	case <-c.done:
		return time.Since(c.at) > healthMaxAge
	default:
		return false
	}
}

// healthKey names one uptime check: the same query, sent to the same server
// with the same headers, gets the same answer.
func healthKey(p Prometheus, query string) string {
	var b strings.Builder
	for _, part := range []string{p.ServerAddress, query} {
		b.WriteString(strconv.Quote(part))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Headers)) {
		b.WriteString(strconv.Quote(name) + strconv.Quote(p.Headers[name]))
	}
	return b.String()
}
