// Package wakeserver is the operator's wake endpoint: the resolver asks it
// to scale a Service's target up from zero (see pkg/wakeapi for the wire
// contract). Concurrent wakes of one Service share one scale call, and a
// settle window answers a burst from memory.
//
// The concept is "wake" in Go; names users may depend on keep KubeElasti's
// "scale": the route /informer/incoming-request, the flags
// --scale-server-bind-address and --scale-timeout, and the metrics
// elasti_operator_scale_request_duration_seconds and
// elasti_operator_scale_counter.
package wakeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/elasti-dev/elasti/pkg/directory"
	"github.com/elasti-dev/elasti/pkg/group"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// Path is the route the server answers, the one resolvers call.
const Path = wakeapi.Path

// WakeRecorder starts an ElastiService's cooldown at a wake, and notes
// each request for one: a resolver asks again while it holds a request,
// and a wake that has not served yet is not undone while it does
// (idle.Wakes is one).
type WakeRecorder interface {
	Record(ctx context.Context, es types.NamespacedName, at time.Time)
	Asked(es types.NamespacedName, at time.Time)
	// Held records what a resolver reported a held request of es waited
	// (status.lastHeld).
	Held(ctx context.Context, es types.NamespacedName, held time.Duration)
}

// Config tunes the server.
type Config struct {
	// WakeTimeout bounds one scale call, shared by every coalesced request.
	WakeTimeout time.Duration
	// SettleWindow is how long after a successful scale-up further requests
	// are answered from memory while the informer cache catches up, so a
	// burst never turns into repeated writes.
	SettleWindow time.Duration
	// Tokens, when set, must accept the request's Bearer token or the
	// request is answered 401. Nil accepts every request, as KubeElasti's
	// operator does (its resolver sends no token).
	Tokens TokenVerifier
}

// TokenVerifier checks a wake request's Bearer token (see pkg/waketoken).
type TokenVerifier interface {
	Verify(ctx context.Context, token string) bool
}

// DefaultConfig suits production.
func DefaultConfig() Config {
	return Config{WakeTimeout: 10 * time.Second, SettleWindow: 5 * time.Second}
}

// Observer receives every request's outcome and duration, and every
// scale-up a request caused (metrics.Operator is one).
type Observer interface {
	ObserveWakeRequest(o outcome.Wake, d time.Duration)
	WakeStarted(es types.NamespacedName, at time.Time)
}

// Server handles POST /informer/incoming-request.
type Server struct {
	dir    *directory.Directory
	scaler scaletarget.Interface
	wakes  WakeRecorder
	// ready reports whether this replica may act: leader with synced caches.
	ready    func() bool
	cfg      Config
	clock    clock.Clock
	baseCtx  context.Context
	observer Observer

	// calls coalesces concurrent wakes of one service.
	calls singleflight.Group
	// settled holds, for SettleWindow after each wake, the generation of
	// the cached target the wake was decided on.
	settled *cache.Expiring
}

// New returns a server. baseCtx outlives requests: a scale started for one
// client finishes even if that client hangs up, because others may wait on it.
func New(baseCtx context.Context, dir *directory.Directory, scaler scaletarget.Interface, wakes WakeRecorder, ready func() bool,
	observer Observer, cfg Config) *Server {
	c := clock.RealClock{}
	return &Server{
		dir: dir, scaler: scaler, wakes: wakes, ready: ready, observer: observer, cfg: cfg,
		clock: c, baseCtx: baseCtx, settled: cache.NewExpiringWithClock(c),
	}
}

// Handler serves the scale route and the held-request reports, and
// nothing else.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, s)
	mux.HandleFunc(wakeapi.HeldPath, s.serveHeld)
	return mux
}

// serveHeld takes a resolver's report of how long a held request waited
// (wakeapi.HeldPath), under the same token and leadership as a wake.
func (s *Server) serveHeld(w http.ResponseWriter, r *http.Request) {
	code, msg := s.handleHeld(r)
	answer(w, r, code, http.StatusText(code), msg)
}

func (s *Server) handleHeld(r *http.Request) (int, string) {
	if code, msg := s.admit(r, wakeapi.HeldPath); code != 0 {
		return code, msg
	}
	rep, err := wakeapi.DecodeHeld(r.Body)
	if errors.Is(err, wakeapi.ErrTooLarge) {
		return http.StatusRequestEntityTooLarge, err.Error()
	}
	if err != nil {
		return http.StatusBadRequest, err.Error()
	}
	svc := types.NamespacedName{Namespace: rep.Namespace, Name: rep.Svc}
	entry, ok := s.dir.Lookup(svc)
	if !ok {
		return http.StatusNotFound, fmt.Sprintf("no ElastiService manages Service %s", svc)
	}
	s.wakes.Held(s.baseCtx, entry.ElastiService, rep.Held())
	return http.StatusAccepted, fmt.Sprintf("recorded a held request of %s", rep.Held())
}

type response struct {
	Outcome string `json:"outcome"`
	Message string `json:"message"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.clock.Now()
	result, code, msg := s.handle(r)
	s.observer.ObserveWakeRequest(result, s.clock.Since(start))
	answer(w, r, code, string(result), msg)
}

// answer writes the JSON answer to r, with the headers its code asks for.
func answer(w http.ResponseWriter, r *http.Request, code int, result, msg string) {
	switch code {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", wakeapi.Challenge(r.Header))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(response{Outcome: result, Message: msg})
}

// admit checks what every POST to path must pass before its body is
// read: the method, the wake token, and that this replica may act. It
// returns the refusal's code and message, or 0.
func (s *Server) admit(r *http.Request, path string) (int, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed; POST %s", r.Method, path)
	}
	// Before anything else is looked at, so a caller without the token
	// learns nothing, not even whether this replica leads.
	if !s.authorized(r) {
		klog.FromContext(s.baseCtx).V(2).Info("Refusing a request without the wake token", "path", path, "remote", r.RemoteAddr)
		return http.StatusUnauthorized, "this operator requires the wake token: Authorization: Bearer <token> (--wake-token-file on the resolver)"
	}
	if !s.ready() {
		return http.StatusServiceUnavailable, "this operator replica is not the leader or its caches are not synced yet; retry"
	}
	return 0, ""
}

// refusedOutcome is the wake outcome of an admit refusal.
var refusedOutcome = map[int]outcome.Wake{
	http.StatusMethodNotAllowed:   outcome.WakeBadRequest,
	http.StatusUnauthorized:       outcome.WakeUnauthorized,
	http.StatusServiceUnavailable: outcome.WakeUnavailable,
}

func (s *Server) handle(r *http.Request) (result outcome.Wake, code int, msg string) {
	if code, msg := s.admit(r, Path); code != 0 {
		return refusedOutcome[code], code, msg
	}
	req, err := wakeapi.DecodeRequest(r.Body)
	if errors.Is(err, wakeapi.ErrTooLarge) {
		return outcome.WakeBadRequest, http.StatusRequestEntityTooLarge, err.Error()
	}
	if err != nil {
		return outcome.WakeBadRequest, http.StatusBadRequest, err.Error()
	}
	svc := types.NamespacedName{Namespace: req.Namespace, Name: req.Svc}
	entry, ok := s.dir.Lookup(svc)
	if !ok {
		return outcome.WakeUnknown, http.StatusNotFound, fmt.Sprintf("no ElastiService manages Service %s", svc)
	}
	s.wakes.Asked(entry.ElastiService, s.clock.Now())
	result, detail, err := s.wake(svc, entry)
	if err != nil {
		return outcome.WakeFailed, http.StatusBadGateway, err.Error()
	}
	if detail != "" {
		return result, http.StatusOK, detail
	}
	return result, http.StatusOK, fmt.Sprintf("%s %s is already scaled up", entry.Target.Kind, entry.Target.Name)
}

// authorized reports whether r carries an accepted token, or none is
// required.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Tokens == nil {
		return true
	}
	token, ok := wakeapi.Bearer(r.Header)
	if !ok {
		return false
	}
	return s.cfg.Tokens.Verify(r.Context(), token)
}

// wake coalesces concurrent requests for one service into a single scale
// call whose result every waiter shares. For SettleWindow after a wake the
// cache may not show the write yet, so requests are answered "already up"
// without another write, unless the cache has moved past the generation the
// wake was decided on: then the target changed since (someone scaled it
// back down) and is looked at afresh. A call records its wake before it
// ends, so a request either shares a call or sees the wake it made.
func (s *Server) wake(svc types.NamespacedName, entry directory.Entry) (outcome.Wake, string, error) {
	answer, err, _ := s.calls.Do(svc.String(), func() (any, error) {
		if s.settledUp(svc, entry) {
			return wakeAnswer{result: outcome.WakeAlreadyUp}, nil
		}
		result, generation, detail, err := s.wakeTarget(entry)
		if err == nil {
			s.settle(svc, generation)
		}
		return wakeAnswer{result: result, detail: detail}, err
	})
	a := answer.(wakeAnswer)
	return a.result, a.detail, err
}

// wakeAnswer is what a coalesced wake call returns to every waiter.
type wakeAnswer struct {
	result outcome.Wake
	// detail says what the call scaled: the target and its replicas, or
	// the step a group wake took; empty when it scaled nothing.
	detail string
}

// settledUp reports whether svc was woken within SettleWindow and its target
// has not changed since.
func (s *Server) settledUp(svc types.NamespacedName, entry directory.Entry) bool {
	generation, ok := s.settled.Get(svc)
	if !ok {
		return false
	}
	cur, err := s.scaler.Get(targetRef(entry))
	return err == nil && cur.Generation <= generation.(int64)
}

// settle remembers a wake decided on the target's generation. Expired
// wakes are dropped as new ones are set, so the map stays as small as the
// set of recently woken services.
func (s *Server) settle(svc types.NamespacedName, generation int64) {
	s.settled.Set(svc, generation, s.cfg.SettleWindow)
}

func targetRef(entry directory.Entry) scaletarget.Ref {
	return scaletarget.Ref{Kind: entry.Target.Kind, Namespace: entry.ElastiService.Namespace, Name: entry.Target.Name}
}

// wakeTarget scales the target to its wake goal unless it is already up.
// It returns the generation of the cached target the decision was made on,
// and what it scaled, for the answer.
// For a group (spec.wakeWith) it scales the target only once every
// dependency is Ready; until then it records the wake, so the controller
// carries it on as each dependency becomes Ready, and takes the next step
// itself (see wakeGroup).
func (s *Server) wakeTarget(entry directory.Entry) (outcome.Wake, int64, string, error) {
	ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.WakeTimeout)
	defer cancel()
	logger := klog.FromContext(ctx).WithValues("elastiService", klog.KRef(entry.ElastiService.Namespace, entry.ElastiService.Name))
	ref := targetRef(entry)
	state, err := s.scaler.Get(ref)
	if err != nil {
		return outcome.WakeFailed, 0, "", fmt.Errorf("cannot read scale target %s: %w", ref, err)
	}
	// With an HPA that owns the target, one replica is up: above zero the
	// HPA decides the count (see scaletarget.GoalFor).
	goal := scaletarget.GoalFor(s.scaler, ref, entry.MinTargetReplicas, entry.Autoscaler)
	if state.Replicas >= goal.UpAt {
		return outcome.WakeAlreadyUp, state.Generation, "", nil
	}
	if len(entry.WakeWith) > 0 {
		if detail, err := s.wakeGroup(ctx, entry); detail != "" || err != nil {
			return outcome.WakeScaled, state.Generation, detail, err
		}
	}
	err = scaletarget.Wake(ctx, s.scaler, ref, goal.Replicas, entry.Autoscaler)
	if !scaletarget.Woken(err) {
		return outcome.WakeFailed, 0, "", err
	}
	if err != nil {
		logger.Error(err, "Woke the target; KEDA stays paused")
	}
	logger.V(2).Info("Scaled up from a request", "target", ref.String(), "replicas", goal.Replicas, "hpa", goal.HPA)
	now := s.clock.Now()
	s.observer.WakeStarted(entry.ElastiService, now)
	s.wakes.Record(ctx, entry.ElastiService, now)
	return outcome.WakeScaled, state.Generation, fmt.Sprintf("scaled %s %s to %d replicas", ref.Kind, ref.Name, goal.Replicas), nil
}

// wakeGroup takes the next step of a group wake whose target is at zero:
// it records the wake (the controller carries a recorded wake on, one
// dependency at a time, as each becomes Ready) and scales the first
// dependency that is below what it wants, if every one before it is
// Ready. It returns what the wake waits on, or "" once every dependency is
// Ready and the target may be scaled.
func (s *Server) wakeGroup(ctx context.Context, entry directory.Entry) (string, error) {
	members := group.Members(entry.ElastiService.Namespace, entry.WakeWith, s.scaler.Get)
	step := group.Next(members)
	if step.Action == group.WakeTarget {
		return "", nil
	}
	now := s.clock.Now()
	// The cold start counts from here, the whole group's wake (the
	// observer keeps the first start of a wake).
	s.observer.WakeStarted(entry.ElastiService, now)
	s.wakes.Record(ctx, entry.ElastiService, now)
	blocking := group.Blocking(members, step)
	if step.Action == group.ScaleUp {
		m := members[step.Index]
		if err := s.scaler.Scale(ctx, m.Ref, m.Wanted); err != nil {
			return "", fmt.Errorf("waking the group of %s: %w", entry.ElastiService, err)
		}
		klog.FromContext(ctx).V(2).Info("Scaled up a dependency from a request", "elastiService",
			klog.KRef(entry.ElastiService.Namespace, entry.ElastiService.Name), "dependency", m.Ref.String(), "replicas", m.Wanted)
	}
	return fmt.Sprintf("waking the group of %s in order: %s", entry.ElastiService, blocking), nil
}
