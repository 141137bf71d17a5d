package errreport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getsentry/sentry-go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

const publicKey = "pk7f3a"

// event is the part of a Sentry event payload the tests look at.
type event struct {
	Environment string                    `json:"environment"`
	Release     string                    `json:"release"`
	Level       string                    `json:"level"`
	Message     string                    `json:"message"`
	Tags        map[string]string         `json:"tags"`
	Fingerprint []string                  `json:"fingerprint"`
	Contexts    map[string]map[string]any `json:"contexts"`
	Request     json.RawMessage           `json:"request"`
	User        map[string]any            `json:"user"`
	Exception   []struct {
		Type       string `json:"type"`
		Value      string `json:"value"`
		Stacktrace *struct {
			Frames []struct {
				Function string `json:"function"`
				Module   string `json:"module"`
			} `json:"frames"`
		} `json:"stacktrace"`
	} `json:"exception"`
}

// ingest is a fake Sentry ingest endpoint on 127.0.0.1.
type ingest struct {
	srv *httptest.Server
	mu  sync.Mutex
	evs []event
}

func newIngest(t *testing.T) *ingest {
	t.Helper()
	in := &ingest{}
	in.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/api/42/envelope/" {
			t.Errorf("unexpected request %s %s", req.Method, req.URL.Path)
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if auth := req.Header.Get("X-Sentry-Auth"); !strings.Contains(auth, "sentry_key="+publicKey) {
			t.Errorf("X-Sentry-Auth = %q, want sentry_key=%s", auth, publicKey)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Errorf("read envelope: %v", err)
			return
		}
		evs, err := decodeEnvelope(body)
		if err != nil {
			t.Errorf("decode envelope: %v\n%s", err, body)
		}
		in.mu.Lock()
		in.evs = append(in.evs, evs...)
		in.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(in.srv.Close)
	return in
}

func (in *ingest) dsn() string {
	return "http://" + publicKey + "@" + in.srv.Listener.Addr().String() + "/42"
}

func (in *ingest) events() []event {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]event(nil), in.evs...)
}

// only returns the single event received, failing otherwise.
func (in *ingest) only(t *testing.T) event {
	t.Helper()
	evs := in.events()
	if len(evs) != 1 {
		t.Fatalf("got %d events, want 1: %+v", len(evs), evs)
	}
	return evs[0]
}

// decodeEnvelope parses a newline-delimited envelope: a header line, then
// for each item a header line and a payload (length-prefixed or a line).
func decodeEnvelope(b []byte) ([]event, error) {
	_, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, errors.New("no envelope header line")
	}
	var evs []event
	for len(bytes.TrimSpace(rest)) > 0 {
		line, after, _ := bytes.Cut(rest, []byte("\n"))
		var hdr struct {
			Type   string `json:"type"`
			Length *int   `json:"length"`
		}
		if err := json.Unmarshal(line, &hdr); err != nil {
			return nil, fmt.Errorf("item header %q: %w", line, err)
		}
		var payload []byte
		if hdr.Length != nil {
			if *hdr.Length > len(after) {
				return nil, fmt.Errorf("item length %d beyond body", *hdr.Length)
			}
			payload, rest = after[:*hdr.Length], bytes.TrimPrefix(after[*hdr.Length:], []byte("\n"))
		} else {
			payload, rest, _ = bytes.Cut(after, []byte("\n"))
		}
		if hdr.Type != "event" {
			continue // e.g. client reports
		}
		var ev event
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("event payload: %w", err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// newSyncReporter sends each event synchronously to in, so assertions need
// no waiting. The transport ignores proxy settings.
func newSyncReporter(t *testing.T, in *ingest, environment string) *Reporter {
	t.Helper()
	tr := sentry.NewHTTPSyncTransport()
	tr.Timeout = 2 * time.Second
	r, err := newReporter(in.dsn(), environment, "elasti@test", options{
		transport:            tr,
		httpTransport:        &http.Transport{},
		disableClientReports: true,
	})
	if err != nil {
		t.Fatalf("newReporter: %v", err)
	}
	t.Cleanup(func() { r.Close(time.Second) })
	if !r.Enabled() {
		t.Fatal("Enabled() = false with a DSN")
	}
	return r
}

func TestReportDropped(t *testing.T) {
	in := newIngest(t)
	r := newSyncReporter(t, in, "staging")

	cause := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("rbac says no"))
	err := fmt.Errorf("scale deployment default/web: %w", cause)
	r.ReportDropped(context.Background(), "elastiservice", ObjectRef{Kind: "ElastiService", Namespace: "default", Name: "web"}, err)

	ev := in.only(t)
	if ev.Environment != "staging" || ev.Release != "elasti@test" {
		t.Errorf("environment/release = %q/%q", ev.Environment, ev.Release)
	}
	if ev.Level != "error" {
		t.Errorf("level = %q, want error", ev.Level)
	}
	wantTags := map[string]string{"queue": "elastiservice", "kind": "ElastiService", "namespace": "default", "name": "web"}
	for k, v := range wantTags {
		if ev.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, ev.Tags[k], v, ev.Tags)
		}
	}
	if len(ev.Exception) == 0 {
		t.Fatal("no exception in event")
	}
	top := ev.Exception[len(ev.Exception)-1] // outermost error is last
	if top.Value != err.Error() {
		t.Errorf("exception value = %q, want %q", top.Value, err.Error())
	}
	if got, want := strings.Join(ev.Fingerprint, "|"), "dropped|elastiservice|StatusReason:Forbidden"; got != want {
		t.Errorf("fingerprint = %q, want %q", got, want)
	}
	if ev.Contexts["workqueue"]["key"] != "default/web" {
		t.Errorf("workqueue context = %v", ev.Contexts["workqueue"])
	}
	if len(ev.Request) != 0 || len(ev.User) != 0 {
		t.Errorf("event carries request %s / user %v", ev.Request, ev.User)
	}
}

func TestReportDroppedScrubsAndGroups(t *testing.T) {
	in := newIngest(t)
	r := newSyncReporter(t, in, "")

	ctx := context.Background()
	r.ReportDropped(ctx, "scaletarget", ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "a"}, errors.New(`Get "https://admin:hunter2@10.0.0.1/x": refused`))
	r.ReportDropped(ctx, "scaletarget", ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "b"}, fmt.Errorf("wait: %w", context.DeadlineExceeded))
	r.ReportDropped(ctx, "scaletarget", ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "c"}, nil) // nil error: nothing

	evs := in.events()
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2", len(evs))
	}
	first := evs[0]
	if v := first.Exception[len(first.Exception)-1].Value; strings.Contains(v, "hunter2") || strings.Contains(v, "admin") || !strings.Contains(v, "[REDACTED]@10.0.0.1") {
		t.Errorf("credentials not scrubbed: %q", v)
	}
	if first.Contexts["workqueue"]["key"] != "ns/a" {
		t.Errorf("workqueue context = %v", first.Contexts["workqueue"])
	}
	if got := strings.Join(first.Fingerprint, "|"); got != "dropped|scaletarget|*errors.errorString" {
		t.Errorf("fingerprint = %q", got)
	}
	second := evs[1]
	if got := strings.Join(second.Fingerprint, "|"); got != "dropped|scaletarget|context.DeadlineExceeded" {
		t.Errorf("fingerprint = %q", got)
	}
	if second.Tags["kind"] != "Deployment" || second.Tags["namespace"] != "ns" || second.Tags["name"] != "b" {
		t.Errorf("tags = %v", second.Tags)
	}
}

func hasFrame(ev event, fn string) bool {
	for _, ex := range ev.Exception {
		if ex.Stacktrace == nil {
			continue
		}
		for _, f := range ex.Stacktrace.Frames {
			if strings.Contains(f.Function, fn) {
				return true
			}
		}
	}
	return false
}

func panicsIn(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func explode(r *Reporter, v any) {
	defer r.RecoverPanic(context.Background(), "scale-server")
	panic(v)
}

func TestRecoverPanicReportsAndRepanics(t *testing.T) {
	in := newIngest(t)
	r := newSyncReporter(t, in, "prod")

	got := panicsIn(func() { explode(r, "kaboom") })
	if got != "kaboom" {
		t.Fatalf("re-panicked with %#v, want \"kaboom\"", got)
	}
	ev := in.only(t)
	if ev.Level != "fatal" || ev.Tags["component"] != "scale-server" || ev.Environment != "prod" {
		t.Errorf("level/component/env = %q/%q/%q", ev.Level, ev.Tags["component"], ev.Environment)
	}
	if len(ev.Exception) == 0 || ev.Exception[len(ev.Exception)-1].Value != "panic: kaboom" {
		t.Fatalf("exception = %+v", ev.Exception)
	}
	if !hasFrame(ev, "explode") {
		t.Errorf("stack trace lacks the panicking frame: %+v", ev.Exception)
	}

	// An error value is re-panicked as the very same value.
	boom := errors.New("boom")
	if got := panicsIn(func() { explode(r, boom) }); got != boom {
		t.Fatalf("re-panicked with %#v, want the original error", got)
	}
	// Not a panic: nothing happens.
	func() { defer r.RecoverPanic(context.Background(), "quiet") }()
	if n := len(in.events()); n != 2 {
		t.Errorf("got %d events, want 2", n)
	}
}

// withUtilruntime installs h as a panic handler and makes HandleCrash not
// crash, restoring both afterwards.
func withUtilruntime(t *testing.T, h func(context.Context, any)) {
	oldHandlers, oldCrash := utilruntime.PanicHandlers, utilruntime.ReallyCrash
	utilruntime.PanicHandlers = append(append([]func(context.Context, any){}, oldHandlers...), h)
	utilruntime.ReallyCrash = false
	t.Cleanup(func() { utilruntime.PanicHandlers, utilruntime.ReallyCrash = oldHandlers, oldCrash })
}

func TestPanicHandler(t *testing.T) {
	in := newIngest(t)
	r := newSyncReporter(t, in, "prod")
	h := r.PanicHandler()

	h(context.Background(), fmt.Errorf("handler saw %d", 7)) // must not panic
	ev := in.only(t)
	if ev.Tags["component"] != "utilruntime" || ev.Exception[len(ev.Exception)-1].Value != "handler saw 7" {
		t.Errorf("event = %+v", ev)
	}

	withUtilruntime(t, h)
	func() {
		defer utilruntime.HandleCrashWithContext(context.Background())
		panic("via HandleCrash")
	}()
	evs := in.events()
	if len(evs) != 2 || evs[1].Exception[len(evs[1].Exception)-1].Value != "panic: via HandleCrash" {
		t.Fatalf("events = %+v", evs)
	}

	// RecoverPanic inside HandleCrash: reported once, not twice.
	func() {
		defer utilruntime.HandleCrashWithContext(context.Background())
		explode(r, "nested")
	}()
	if n := len(in.events()); n != 3 {
		t.Errorf("got %d events, want 3 (no duplicate for the nested panic)", n)
	}
	// http.ErrAbortHandler is how net/http aborts a response, not a crash.
	h(context.Background(), http.ErrAbortHandler)
	if n := len(in.events()); n != 3 {
		t.Errorf("ErrAbortHandler was reported")
	}
}

func TestDisabled(t *testing.T) {
	// With an empty DSN, sentry-go would read SENTRY_DSN itself; New must not
	// initialise sentry at all, so this server must never be contacted.
	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t.Errorf("disabled reporter sent %s %s", req.Method, req.URL)
	}))
	defer never.Close()
	t.Setenv(EnvDSN, "http://"+publicKey+"@"+never.Listener.Addr().String()+"/42")

	before := runtime.NumGoroutine()
	r, err := New("", "prod", "v1")
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := FromEnv(func(string) string { return "" }, "v1")
	if err != nil {
		t.Fatal(err)
	}
	var nilReporter *Reporter
	for _, r := range []*Reporter{r, fromEnv, nilReporter, {}} {
		if r.Enabled() {
			t.Fatal("Enabled() = true without a DSN")
		}
		if r != nil && (r.client != nil || r.hub != nil) {
			t.Fatal("sentry client created without a DSN")
		}
		ctx := context.Background()
		r.ReportDropped(ctx, "q", ObjectRef{Kind: "K", Namespace: "ns", Name: "n"}, errors.New("x"))
		r.PanicHandler()(ctx, "p")
		func() { defer r.RecoverPanic(ctx, "c") }()
		// A disabled reporter leaves a panic untouched.
		if got := panicsIn(func() { explode(r, "untouched") }); got != "untouched" {
			t.Errorf("panic value = %#v", got)
		}
		if !r.Flush(time.Millisecond) || !r.Close(time.Millisecond) {
			t.Error("Flush/Close of a disabled reporter = false")
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d -> %d: disabled reporter started work", before, after)
	}
}

func TestInvalidDSN(t *testing.T) {
	const secret = "s3cr3tK3y"
	for _, dsn := range []string{
		"not a dsn",
		"http://127.0.0.1/",
		"http://127.0.0.1/42",
		"ftp://" + publicKey + ":" + secret + "@127.0.0.1/42",
		"http://" + publicKey + ":" + secret + "@127.0.0.1/",
		"http://" + publicKey + ":" + secret + "@127.0.0.1",
		"http://" + publicKey + ":" + secret + "@/42",
		"http://" + publicKey + ":" + secret + "@127.0.0.1:notaport/42",
		"http://" + publicKey + ":" + secret + "@127.0.0.1/%zz",
	} {
		r, err := New(dsn, "prod", "v1")
		if err == nil {
			r.Close(time.Millisecond)
			t.Errorf("New(%q) succeeded", dsn)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrInvalidDSN) || !strings.Contains(msg, "SENTRY_DSN") {
			t.Errorf("New(%q) error %q does not name SENTRY_DSN", dsn, msg)
		}
		if strings.Contains(msg, secret) || strings.Contains(msg, publicKey) || strings.Contains(msg, dsn) {
			t.Errorf("New(%q) error leaks the DSN: %q", dsn, msg)
		}
	}
	// The same, through FromEnv.
	_, err := FromEnv(func(k string) string {
		if k == EnvDSN {
			return "https://" + publicKey + ":" + secret + "@sentry.invalid"
		}
		return ""
	}, "")
	if !errors.Is(err, ErrInvalidDSN) || strings.Contains(err.Error(), secret) {
		t.Errorf("FromEnv error = %v", err)
	}
}

// TestFromEnv goes through the production path: the default asynchronous
// transport, flushed explicitly.
func TestFromEnv(t *testing.T) {
	in := newIngest(t)
	env := map[string]string{
		EnvDSN:         " " + in.dsn() + " ",
		EnvEnvironment: "staging",
		EnvRelease:     "elasti@1.2.3",
	}
	r, err := FromEnv(func(k string) string { return env[k] }, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(time.Second)
	if !r.Enabled() {
		t.Fatal("Enabled() = false")
	}
	r.ReportDropped(context.Background(), "scaletarget", ObjectRef{Kind: "Deployment", Namespace: "ns", Name: "web"}, errors.New("gone"))
	if !r.Flush(3 * time.Second) {
		t.Fatal("Flush timed out")
	}
	ev := in.only(t)
	if ev.Environment != "staging" || ev.Release != "elasti@1.2.3" || ev.Tags["queue"] != "scaletarget" {
		t.Errorf("event = %+v", ev)
	}

	// An explicit release wins over SENTRY_RELEASE.
	r2, err := FromEnv(func(k string) string { return env[k] }, "elasti@9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(time.Second)
	r2.ReportDropped(context.Background(), "q", ObjectRef{Kind: "K", Name: "k"}, errors.New("x"))
	r2.Flush(3 * time.Second)
	if evs := in.events(); len(evs) != 2 || evs[1].Release != "elasti@9.9.9" {
		t.Errorf("events = %+v", evs)
	}
}

func TestErrorClass(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "x"), "StatusReason:NotFound"},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", context.Canceled)), "context.Canceled"},
		{fmt.Errorf("a: %w", panicError{value: 1}), "errreport.panicError"},
		{errors.Join(errors.New("a"), errors.New("b")), "*errors.joinError"},
	} {
		if got := errorClass(tc.err); got != tc.want {
			t.Errorf("errorClass(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
