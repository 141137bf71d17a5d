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
)

// HealthMemo shares uptime checks among the evaluations of one poll. A fleet
// whose triggers use one Prometheus then asks it once per poll whether it
// has been up, not once per ElastiService: at 10,000 that halves the queries
// the poller sends. Callers asking for a check already under way wait for
// its answer. Use a new memo for each poll, so no answer outlives it.
type HealthMemo struct {
	mu     sync.Mutex
	checks map[string]*healthCheck
}

type healthCheck struct {
	done    chan struct{}
	healthy bool
	err     error
}

// healthy returns the answer of check for key, running it only if no
// caller has yet; server names the Prometheus in an error.
func (m *HealthMemo) healthy(ctx context.Context, key, server string, check func() (bool, error)) (bool, error) {
	m.mu.Lock()
	if m.checks == nil {
		m.checks = map[string]*healthCheck{}
	}
	c, found := m.checks[key]
	if !found {
		c = &healthCheck{done: make(chan struct{})}
		m.checks[key] = c
	}
	m.mu.Unlock()
	if !found {
		c.healthy, c.err = check()
		close(c.done)
		return c.healthy, c.err
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
