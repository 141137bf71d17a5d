package wakeserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// fuzzToken is the one wake token fuzzTokens accepts.
const fuzzToken = "s3cr3t"

type fuzzTokens struct{}

func (fuzzTokens) Verify(_ context.Context, token string) bool { return token == fuzzToken }

// newDirectServer is setup without a listener: the handler alone, for
// shop/web, with the target at zero, and with a wake token if requireToken.
func newDirectServer(requireToken bool) (*Server, *scaletargettest.Scaler, *fakeWakes) {
	dir := shopWebDirectory(3, nil)
	cfg := DefaultConfig()
	if requireToken {
		cfg.Tokens = fuzzTokens{}
	}
	scaler, status := &scaletargettest.Scaler{}, &fakeWakes{}
	return New(context.Background(), dir, scaler, status, func() bool { return true }, &outcomes{}, cfg), scaler, status
}

// FuzzHandler sends arbitrary methods, Authorization headers and bodies to
// the scale endpoint, with and without a wake token configured. It never
// panics, always answers JSON with an outcome, maps every failure to its
// status (405 not POST, 401 without the token, 413 over the limit, 400
// malformed, 404 unknown Service), and writes to the scale target only for
// the one Service it manages.
func FuzzHandler(f *testing.F) {
	for _, seed := range []string{
		body, `{"count":1,"svc":"api","namespace":"shop"}`, `{"count":1,"svc":"web","namespace":"other"}`,
		`{`, `null`, `[]`, `{"svc":"Web","namespace":"shop"}`, `{"svc":"web","namespace":"shop"} x`,
		`{"svc":"../web","namespace":"shop"}`, `{"svc":"web","namespace":"shop/web"}`,
		body + strings.Repeat(" ", wakeapi.MaxBodyBytes), "\x00\xff", "",
	} {
		f.Add(http.MethodPost, "", []byte(seed), false)
		f.Add(http.MethodPost, "Bearer "+fuzzToken, []byte(seed), true)
	}
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "bearer " + fuzzToken, "Basic czNjcjN0", fuzzToken, "Bearer " + fuzzToken + " x"} {
		f.Add(http.MethodPost, auth, []byte(body), true)
	}
	f.Add(http.MethodGet, "", []byte(body), false)
	f.Add("PUT", "Bearer "+fuzzToken, []byte(body), true)
	f.Fuzz(func(t *testing.T, method, auth string, payload []byte, requireToken bool) {
		req, err := http.NewRequest(method, Path, bytes.NewReader(payload))
		if err != nil {
			return // not a method net/http would hand a handler
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		s, scaler, _ := newDirectServer(requireToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)

		var resp response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Outcome == "" || resp.Message == "" {
			t.Fatalf("%s %q: answer %d %q is not a JSON outcome", method, payload, rec.Code, rec.Body)
		}
		if len(resp.Message) > 1024 {
			t.Fatalf("%d-byte message", len(resp.Message))
		}
		want, decoded := expectedCode(method, payload)
		if want != http.StatusMethodNotAllowed && requireToken {
			if token, ok := wakeapi.Bearer(req.Header); !ok || token != fuzzToken {
				want = http.StatusUnauthorized
			}
		}
		if rec.Code != want {
			t.Fatalf("%s %q (Authorization %q, token required %v): %d %s, want %d", method, payload, auth, requireToken, rec.Code, resp.Message, want)
		}
		wantScales := 0
		if rec.Code == http.StatusOK {
			if decoded.Svc != "web" || decoded.Namespace != "shop" {
				t.Fatalf("200 for %+v, which nothing manages", decoded)
			}
			wantScales = 1
		}
		if n := scaler.Calls(); n != wantScales {
			t.Fatalf("%s %q: %d scale writes, want %d", method, payload, n, wantScales)
		}
	})
}

// expectedCode is the status the endpoint must answer, decided from the
// request alone.
func expectedCode(method string, payload []byte) (int, wakeapi.Request) {
	if method != http.MethodPost {
		return http.StatusMethodNotAllowed, wakeapi.Request{}
	}
	if len(payload) > wakeapi.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, wakeapi.Request{}
	}
	req, err := wakeapi.DecodeRequest(bytes.NewReader(payload))
	switch {
	case err != nil:
		return http.StatusBadRequest, req
	case req.Svc != "web" || req.Namespace != "shop":
		return http.StatusNotFound, req
	}
	return http.StatusOK, req
}

// Over HTTP, each kind of bad request gets its status and a message that
// says what is wrong, and nothing is scaled.
func TestBadRequestsAreRefusedClearly(t *testing.T) {
	scaler := &scaletargettest.Scaler{}
	_, status, url := setup(t, true, scaler)
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"count":1,"svc":"web"`, http.StatusBadRequest, "malformed JSON"},
		{`{"count":1,"svc":"web","namespace":"shop"}{}`, http.StatusBadRequest, "more than one value"},
		{`{"count":1,"svc":"Web","namespace":"shop"}`, http.StatusBadRequest, "is not a Service name"},
		{`{"count":1,"namespace":"shop"}`, http.StatusBadRequest, `"svc" is required`},
		{`{"count":1,"svc":"api","namespace":"shop"}`, http.StatusNotFound, "no ElastiService manages Service shop/api"},
		{`{"count":1,"svc":"web","namespace":"other"}`, http.StatusNotFound, "no ElastiService manages Service other/web"},
		{body + strings.Repeat(" ", wakeapi.MaxBodyBytes), http.StatusRequestEntityTooLarge, "request body too large"},
	} {
		resp, err := http.Post(url, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var got response
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || !strings.Contains(got.Message, tc.want) {
			t.Errorf("%.50q: %d %+v (%v); want %d with %q", tc.body, resp.StatusCode, got, err, tc.code, tc.want)
		}
	}
	if n := scaler.Calls(); n != 0 || status.writes.Load() != 0 {
		t.Errorf("%d scale writes and %d status writes for bad requests, want none", n, status.writes.Load())
	}
}
