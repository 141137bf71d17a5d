package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// heldBurstProgram is a client-pod program (realnet.Program): many clients
// of one Service at once, each with a deadline of its own, reporting every
// attempt. A Request burst cannot say when each answer came or retry.
const heldBurstProgram = "held-burst"

func init() { realnet.RegisterProgram(heldBurstProgram, runHeldBurst) }

// heldBurstCall asks for N GETs at once, each on a connection of its own
// (so kube-proxy spreads them over the Service's endpoints), each bounded
// by Deadline from its first attempt.
type heldBurstCall struct {
	URL      string        `json:"url"` // "{i}" becomes the request's index
	N        int           `json:"n"`
	Deadline time.Duration `json:"deadline"`
	// MaxRetries is how often a request is sent again after a 503 with a
	// Retry-After, once that time has passed, if its deadline allows; as a
	// well-behaved client does. No other answer and no error is retried.
	MaxRetries int `json:"maxRetries"`
}

// burstAttempt is one attempt of one request, as the client saw it.
type burstAttempt struct {
	Status int         `json:"status,omitempty"`
	Header http.Header `json:"header,omitempty"`
	// Body is the start of the answer.
	Body string `json:"body,omitempty"`
	// Err is set when no HTTP answer came: a reset, a refusal, the
	// deadline.
	Err      string    `json:"err,omitempty"`
	Sent     time.Time `json:"sent"`
	Answered time.Time `json:"answered"`
}

func (a burstAttempt) String() string {
	took := a.Answered.Sub(a.Sent).Round(time.Millisecond)
	if a.Err != "" {
		return fmt.Sprintf("error after %s: %s", took, a.Err)
	}
	return fmt.Sprintf("%d after %s (Retry-After %q): %q", a.Status, took, a.Header.Get("Retry-After"), strings.TrimSpace(a.Body))
}

// burstRequest is one request's attempts, in order; the last is its
// outcome.
type burstRequest struct {
	Attempts []burstAttempt `json:"attempts"`
}

func (r burstRequest) last() burstAttempt { return r.Attempts[len(r.Attempts)-1] }

// took is the time from the first attempt's start to the last answer.
func (r burstRequest) took() time.Duration { return r.last().Answered.Sub(r.Attempts[0].Sent) }

func runHeldBurst(ctx context.Context, arg json.RawMessage) (any, error) {
	var c heldBurstCall
	if err := json.Unmarshal(arg, &c); err != nil {
		return nil, err
	}
	out := make([]burstRequest, c.N)
	var wg sync.WaitGroup
	for i := range out {
		url := strings.ReplaceAll(c.URL, "{i}", strconv.Itoa(i))
		wg.Go(func() { out[i] = heldBurstOne(ctx, url, c.Deadline, c.MaxRetries) })
	}
	wg.Wait()
	return out, nil
}

func heldBurstOne(ctx context.Context, url string, deadline time.Duration, maxRetries int) burstRequest {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var r burstRequest
	for {
		a := heldBurstAttempt(ctx, url)
		r.Attempts = append(r.Attempts, a)
		if a.Status != http.StatusServiceUnavailable || len(r.Attempts) > maxRetries {
			return r
		}
		secs, err := strconv.Atoi(a.Header.Get("Retry-After"))
		if err != nil || secs < 0 {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(time.Duration(secs) * time.Second):
		}
	}
}

func heldBurstAttempt(ctx context.Context, url string) (a burstAttempt) {
	a.Sent = time.Now()
	defer func() { a.Answered = time.Now() }()
	// A connection of its own, closed after the answer.
	t := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	defer t.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	a.Status, a.Header, a.Body = resp.StatusCode, resp.Header, string(b)
	if err != nil {
		a.Err = "reading the body: " + err.Error()
	}
	return a
}
