// Package errreport sends the operator's unrecoverable failures to Sentry:
// keys a work loop drops after exhausting its retries, and panics.
//
// It reads the same environment as KubeElasti (SENTRY_DSN and
// SENTRY_ENVIRONMENT). With no DSN the Reporter is inert: no Sentry client,
// no goroutines, no network. A nil *Reporter is inert too, so callers never
// need to check before using one.
//
// Each Reporter owns its own sentry.Client and sentry.Hub; nothing touches
// sentry's global hub. Tracing is off and no PII, request data or URL
// credentials are sent.
package errreport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/getsentry/sentry-go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	// EnvDSN names the variable holding the Sentry DSN; empty disables
	// reporting.
	EnvDSN = "SENTRY_DSN"
	// EnvEnvironment names the variable holding the Sentry environment
	// (e.g. "production", "staging").
	EnvEnvironment = "SENTRY_ENVIRONMENT"
	// EnvRelease names the variable read when no release is passed in.
	EnvRelease = "SENTRY_RELEASE"

	// PanicFlushTimeout bounds how long a panic report waits to be sent
	// before the process is allowed to crash.
	PanicFlushTimeout = 2 * time.Second

	// panicDedupWindow is how long a reported panic value suppresses a
	// second report of the same value (RecoverPanic re-panics, and an
	// outer utilruntime.HandleCrash would otherwise report it again).
	panicDedupWindow = 10 * time.Second
)

// ErrInvalidDSN is wrapped by the error New returns for a malformed DSN.
var ErrInvalidDSN = errors.New("invalid " + EnvDSN)

// ObjectRef names the Kubernetes object a dropped key stood for.
type ObjectRef struct {
	Kind      string
	Namespace string
	Name      string
}

// key is the object's queue key, "namespace/name" or, cluster-scoped,
// "name".
func (o ObjectRef) key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Reporter sends errors and panics to Sentry. The zero value and nil are
// disabled reporters. It is safe for concurrent use.
type Reporter struct {
	client *sentry.Client
	hub    *sentry.Hub

	mu        sync.Mutex
	lastPanic any
	lastAt    time.Time
}

// options are test seams; production uses the zero value.
type options struct {
	transport            sentry.Transport
	httpTransport        http.RoundTripper
	disableClientReports bool
}

// FromEnv builds a Reporter from SENTRY_DSN and SENTRY_ENVIRONMENT as read
// by getenv (os.Getenv when nil). An empty release falls back to
// SENTRY_RELEASE.
func FromEnv(getenv func(string) string, release string) (*Reporter, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if release == "" {
		release = strings.TrimSpace(getenv(EnvRelease))
	}
	return New(getenv(EnvDSN), strings.TrimSpace(getenv(EnvEnvironment)), release)
}

// New returns a Reporter sending to dsn. An empty dsn returns a disabled
// Reporter without initialising Sentry at all. A malformed dsn is an error
// wrapping ErrInvalidDSN; the message never contains the DSN's keys.
func New(dsn, environment, release string) (*Reporter, error) {
	return newReporter(dsn, environment, release, options{})
}

func newReporter(dsn, environment, release string, o options) (*Reporter, error) {
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return &Reporter{}, nil
	}
	if err := validateDSN(dsn); err != nil {
		return nil, err
	}
	client, err := sentry.NewClient(sentry.ClientOptions{
		Dsn:         dsn,
		Environment: environment,
		Release:     release,
		// No performance monitoring, only errors.
		EnableTracing:    false,
		TracesSampleRate: 0,
		// No PII: no user info, cookies, headers, query strings or bodies.
		DataCollection: &sentry.DataCollection{
			UserInfo:    sentry.Set(false),
			Cookies:     &sentry.KeyValueCollectionBehavior{Mode: sentry.CollectionOff},
			HTTPHeaders: &sentry.HeaderCollectionConfig{Request: &sentry.KeyValueCollectionBehavior{Mode: sentry.CollectionOff}, Response: &sentry.KeyValueCollectionBehavior{Mode: sentry.CollectionOff}},
			HTTPBodies:  []sentry.BodyType{},
			QueryParams: &sentry.KeyValueCollectionBehavior{Mode: sentry.CollectionOff},
		},
		MaxBreadcrumbs:       -1,
		BeforeSend:           scrub,
		Transport:            o.transport,
		HTTPTransport:        o.httpTransport,
		DisableClientReports: o.disableClientReports,
	})
	if err != nil {
		// validateDSN should have caught everything; never echo the DSN.
		return nil, fmt.Errorf("%w: rejected by sentry-go: %s", ErrInvalidDSN, redact(err.Error(), dsn))
	}
	return &Reporter{client: client, hub: sentry.NewHub(client, sentry.NewScope())}, nil
}

// validateDSN checks the DSN's shape with messages that never include it.
func validateDSN(dsn string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s (expected https://<public-key>@<host>/<project-id>)", ErrInvalidDSN, why)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("scheme must be http or https")
	}
	if u.User == nil || u.User.Username() == "" {
		return bad("missing public key")
	}
	if u.Hostname() == "" {
		return bad("missing host")
	}
	// sentry-go takes the last path segment as the project id.
	if u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return bad("missing project id")
	}
	return nil
}

// redact removes the DSN and its userinfo from s.
func redact(s, dsn string) string {
	s = strings.ReplaceAll(s, dsn, "[SENTRY_DSN]")
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			s = strings.ReplaceAll(s, pw, "[REDACTED]")
		}
		if name := u.User.Username(); name != "" {
			s = strings.ReplaceAll(s, name, "[REDACTED]")
		}
	}
	return s
}

// Enabled reports whether events are sent anywhere.
func (r *Reporter) Enabled() bool { return r != nil && r.hub != nil }

// ReportDropped reports the object behind a key a queue gave up on. Events
// group by queue and error class (API status reason, context error, or
// innermost error type), and carry the object's kind, namespace and name
// as tags. It returns at once; the event is sent in the background.
func (r *Reporter) ReportDropped(ctx context.Context, queue string, object ObjectRef, err error) {
	if !r.Enabled() || err == nil {
		return
	}
	hub := r.hub.Clone()
	hub.ConfigureScope(func(s *sentry.Scope) {
		s.SetLevel(sentry.LevelError)
		s.SetTag("queue", queue)
		s.SetTags(map[string]string{
			"kind":      object.Kind,
			"namespace": object.Namespace,
			"name":      object.Name,
		})
		s.SetContext("workqueue", sentry.Context{"queue": queue, "key": object.key()})
		s.SetFingerprint([]string{"dropped", queue, errorClass(err)})
	})
	hub.Client().CaptureException(err, &sentry.EventHint{Context: ctx, OriginalException: err}, hub.Scope())
}

// RecoverPanic reports a panic and panics again with the same value, so the
// process still crashes. Defer it directly at the top of a goroutine:
//
//	defer reporter.RecoverPanic(ctx, "scale-server")
//
// (recover only works when RecoverPanic itself is the deferred call). It
// waits up to PanicFlushTimeout for the report to be sent. A disabled
// Reporter does not recover at all, leaving the panic untouched.
func (r *Reporter) RecoverPanic(ctx context.Context, component string) {
	if !r.Enabled() {
		return
	}
	v := recover()
	if v == nil {
		return
	}
	r.reportPanic(ctx, component, v)
	panic(v)
}

// PanicHandler returns a hook for k8s.io/apimachinery's
// utilruntime.PanicHandlers. It reports and flushes but does not panic:
// utilruntime.HandleCrash re-panics after its handlers run. A panic already
// reported by RecoverPanic is not reported twice.
func (r *Reporter) PanicHandler() func(context.Context, any) {
	return func(ctx context.Context, v any) {
		if !r.Enabled() || v == nil {
			return
		}
		r.reportPanic(ctx, "utilruntime", v)
	}
}

func (r *Reporter) reportPanic(ctx context.Context, component string, v any) {
	// net/http uses this value to abort a response; it is not a crash.
	if v == http.ErrAbortHandler || r.seenPanic(v) {
		return
	}
	hub := r.hub.Clone()
	hub.ConfigureScope(func(s *sentry.Scope) {
		s.SetLevel(sentry.LevelFatal)
		s.SetTag("component", component)
		s.SetTag("panic", "true")
	})
	// An error value gets the panicking goroutine's stack attached.
	hub.RecoverWithContext(ctx, panicAsError(v))
	hub.Flush(PanicFlushTimeout)
}

// seenPanic records v and reports whether it was just reported.
func (r *Reporter) seenPanic(v any) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.lastAt.Add(panicDedupWindow).After(now) && sameValue(r.lastPanic, v) {
		return true
	}
	r.lastPanic, r.lastAt = v, now
	return false
}

// sameValue is == that treats incomparable values as different.
func sameValue(a, b any) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a != nil && a == b
}

// Flush waits up to timeout for queued events to be sent and reports
// whether they all were. A disabled Reporter has nothing to flush.
func (r *Reporter) Flush(timeout time.Duration) bool {
	if !r.Enabled() {
		return true
	}
	return r.hub.Flush(timeout)
}

// Close flushes (up to timeout) and then releases the client's transport
// and background workers. The Reporter sends nothing afterwards.
func (r *Reporter) Close(timeout time.Duration) bool {
	if !r.Enabled() {
		return true
	}
	ok := r.Flush(timeout)
	r.client.Close()
	return ok
}

// panicError carries a non-error panic value so Sentry records it as an
// exception with a stack trace.
type panicError struct{ value any }

func (p panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

func panicAsError(v any) error {
	if err, ok := v.(error); ok {
		return err
	}
	return panicError{value: v}
}

// errorClass is a bounded label for grouping: the API status reason, a
// context error, or the innermost error's type.
func errorClass(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		if s.Reason != "" {
			return "StatusReason:" + string(s.Reason)
		}
		return fmt.Sprintf("StatusCode:%d", s.Code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	}
	inner := err
	for next := errors.Unwrap(inner); next != nil; next = errors.Unwrap(inner) {
		inner = next
	}
	return reflect.TypeOf(inner).String()
}

// urlUserinfo matches the credentials part of a URL (scheme://user:pw@).
var urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]+@`)

// scrub removes request data, user data and URL credentials from an event.
func scrub(event *sentry.Event, _ *sentry.EventHint) *sentry.Event {
	event.Request = nil
	event.User = sentry.User{}
	event.Breadcrumbs = nil
	event.Message = urlUserinfo.ReplaceAllString(event.Message, "${1}[REDACTED]@")
	for i := range event.Exception {
		event.Exception[i].Value = urlUserinfo.ReplaceAllString(event.Exception[i].Value, "${1}[REDACTED]@")
	}
	return event
}
