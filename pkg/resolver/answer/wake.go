package answer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/pkg/podcheck"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// What a wake shows while it runs (issue 41, item 3): the waiting page
// for a person, and the wake status for an API client that asks for it,
// both said from one Wake. An API client asks with RFC 7240's Prefer
// header: "Prefer: respond-async" gets the status at once instead of
// being held, "Prefer: wait=N" after N seconds of its hold (a client
// behind a proxy that cuts a silent connection at 60 s sends wait=50),
// and any later ask the same again, until a pod is Ready and the request
// goes through. Each ask is held and wakes as any request.

// Wake is how far a Service's wake is, as the resolver sees it.
type Wake struct {
	// Progress is the furthest of the Service's pods (package wakestage).
	Progress wakestage.Progress
	// Readiness is what that Service's probed pod answered the
	// resolver's own readiness checks so far (package directprobe), none
	// without direct probing.
	Readiness podcheck.Answers
	// Estimate is the Service's median cold start
	// (status.recentColdStarts), 0 when it has none.
	Estimate time.Duration
}

// StatusWaking is the wake status' reason in its JSON body, beside a
// BoundAnswer's.
const StatusWaking = "Waking"

// MaxPreferWait bounds the wait=N a client may prefer; a longer one is
// past any hold timeout (at most an hour) and asks for nothing.
const MaxPreferWait = time.Hour

// PreferredWait reads req's Prefer header (RFC 7240): whether the client
// asks for the wake status instead of a long hold, after how long, and
// the Preference-Applied value that says what was honoured.
// respond-async asks for it at once, or after wait=N seconds when the
// client gives both; wait=N alone after N seconds. Names are matched in
// any case, values may be quoted, and anything else is ignored, as the
// RFC asks.
func PreferredWait(req *http.Request) (after time.Duration, applied string, ok bool) {
	async, wait := false, time.Duration(-1)
	for _, v := range req.Header.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			token, _, _ := strings.Cut(pref, ";") // parameters are ignored
			name, value, _ := strings.Cut(token, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			value = strings.Trim(strings.TrimSpace(value), `"`)
			switch name {
			case "respond-async":
				async = true
			case "wait":
				// The first wait counts, as the RFC's first of a preference.
				if n, err := strconv.ParseUint(value, 10, 32); err == nil && wait < 0 && n <= uint64(MaxPreferWait/time.Second) {
					wait = time.Duration(n) * time.Second
				}
			}
		}
	}
	switch {
	case wait >= 0 && async:
		return wait, "respond-async, wait=" + strconv.Itoa(int(wait/time.Second)), true
	case wait >= 0:
		return wait, "wait=" + strconv.Itoa(int(wait/time.Second)), true
	case async:
		return 0, "respond-async", true
	}
	return 0, "", false
}

// statusBody is the wake status, as JSON.
type statusBody struct {
	Service string `json:"service"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Stage is a wakestage.Stage; StageSeconds how long the pod has been
	// in it, when its status says.
	Stage        wakestage.Stage `json:"stage"`
	StageSeconds *int            `json:"stageSeconds,omitempty"`
	Problem      string          `json:"problem,omitempty"`
	Restarts     int32           `json:"restarts,omitempty"`
	// Readiness is what the pod answered the resolver's checks so far.
	Readiness         []podcheck.AnswerCount `json:"readiness,omitempty"`
	ElapsedSeconds    int                    `json:"elapsedSeconds"`
	EstimateSeconds   int                    `json:"estimateSeconds,omitempty"`
	RetryAfterSeconds int                    `json:"retryAfterSeconds"`
}

// RetryAfter is when a client told to come back after waited should:
// the rest of estimate, the Service's usual cold start, or fallback when
// there is none or the wake is slower than usual.
func RetryAfter(estimate, waited, fallback time.Duration) time.Duration {
	if estimate > waited {
		return estimate - waited
	}
	return fallback
}

// Status answers req with svc's wake status: 503, Retry-After from
// wake's estimate (fallback without one), Preference-Applied, and the
// status as JSON. The wake's clock is the waiting pages' (since when its
// pages and statuses count).
func (p *Pages) Status(w http.ResponseWriter, svc clusterview.ServiceRef, wake Wake, began time.Time, fallback time.Duration, applied string) {
	now := time.Now()
	elapsed := max(0, now.Sub(p.clock.since(svc, began, now)))
	retry := RetryAfterSeconds(RetryAfter(wake.Estimate, elapsed, fallback))
	seconds, _ := strconv.Atoi(retry)
	b := statusBody{Service: svc.String(), Reason: StatusWaking, Message: fmt.Sprintf("service %s is starting: %s", svc, wake.words(now)),
		Stage: wake.Progress.Stage, Problem: wake.Progress.Problem, Restarts: wake.Progress.Restarts,
		Readiness: wake.Readiness.List(), ElapsedSeconds: wholeSeconds(elapsed), EstimateSeconds: wholeSeconds(wake.Estimate),
		RetryAfterSeconds: seconds}
	if s := wake.Progress.Since; !s.IsZero() {
		n := wholeSeconds(max(0, now.Sub(s)))
		b.StageSeconds = &n
	}
	body, _ := json.Marshal(b)
	p.statuses.Inc()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", retry)
	h.Set("Preference-Applied", applied)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(append(body, '\n'))
}

func wholeSeconds(d time.Duration) int { return int(d.Round(time.Second) / time.Second) }

// words says the wake's stage for a person: "started, not ready yet for
// 12 s (readiness answered refused ×40, HTTP 503 ×12)".
func (wake Wake) words(now time.Time) string {
	p := wake.Progress
	s := p.Stage.Words()
	if !p.Since.IsZero() {
		s += " for " + strconv.Itoa(wholeSeconds(max(0, now.Sub(p.Since)))) + " s"
	}
	if p.Problem != "" {
		s += " (" + p.Problem + ")"
	}
	if p.Restarts > 0 {
		s += fmt.Sprintf(", %d restart(s)", p.Restarts)
	}
	if answers := wake.Readiness.List(); len(answers) > 0 && p.Stage != wakestage.Ready {
		parts := make([]string, len(answers))
		for i, a := range answers {
			parts[i] = fmt.Sprintf("%s ×%d", a.Answer, a.Count)
		}
		s += "; its readiness check answered " + strings.Join(parts, ", ")
	}
	return s
}
