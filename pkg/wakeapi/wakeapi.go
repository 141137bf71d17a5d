// Package wakeapi is the wire contract between a resolver and the
// operator's scale-from-zero endpoint: KubeElasti's route and body, which
// existing resolvers send, defined once for both sides.
package wakeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Path is KubeElasti's route, which existing resolvers call.
const Path = "/informer/incoming-request"

// MaxBodyBytes caps a request body; a real one is under 200 bytes.
const MaxBodyBytes = 8 << 10

// Request is KubeElasti's body: {"count":1,"svc":"<public svc>","namespace":"<ns>"}.
type Request struct {
	Count     int    `json:"count"`
	Svc       string `json:"svc"`
	Namespace string `json:"namespace"`
}

// ErrTooLarge marks a body over MaxBodyBytes.
var ErrTooLarge = errors.New("request body too large")

// Encode returns the body a resolver sends for svc in namespace, fields in
// KubeElasti's order.
func Encode(namespace, svc string) []byte {
	// Three plain fields: Marshal cannot fail.
	b, _ := json.Marshal(Request{Count: 1, Svc: svc, Namespace: namespace})
	return b
}

// DecodeRequest reads and validates one request body. Unknown fields are
// ignored so newer resolvers keep working; missing or malformed names are
// errors.
func DecodeRequest(r io.Reader) (Request, error) {
	var req Request
	if err := decodeOne(r, &req, `{"count":1,"svc":"<service>","namespace":"<namespace>"}`); err != nil {
		return Request{}, err
	}
	problems := nameProblems(req.Svc, req.Namespace)
	if req.Count < 0 {
		problems = append(problems, `"count" must not be negative`)
	}
	if len(problems) > 0 {
		return Request{}, errors.New(strings.Join(problems, "; "))
	}
	return req, nil
}

// HeldPath is elasti's own route, beside KubeElasti's: a resolver reports
// there how long a held request it released waited, for the
// ElastiService's status.lastHeld. An operator without it answers 404,
// which the resolver only logs.
const HeldPath = "/elasti/held-request"

// MaxHeld bounds a reported wait: far longer than any hold
// (--request-timeout).
const MaxHeld = 24 * time.Hour

// HeldReport is the body of a report to HeldPath:
// {"svc":"<public svc>","namespace":"<ns>","heldMillis":<ms>}.
type HeldReport struct {
	Svc        string `json:"svc"`
	Namespace  string `json:"namespace"`
	HeldMillis int64  `json:"heldMillis"`
}

// Held is the reported wait.
func (h HeldReport) Held() time.Duration { return time.Duration(h.HeldMillis) * time.Millisecond }

// EncodeHeld returns the body a resolver sends to report that a request
// held for svc in namespace waited held.
func EncodeHeld(namespace, svc string, held time.Duration) []byte {
	// Three plain fields: Marshal cannot fail.
	b, _ := json.Marshal(HeldReport{Svc: svc, Namespace: namespace, HeldMillis: held.Milliseconds()})
	return b
}

// DecodeHeld reads and validates one report body, as DecodeRequest does.
func DecodeHeld(r io.Reader) (HeldReport, error) {
	var rep HeldReport
	if err := decodeOne(r, &rep, `{"svc":"<service>","namespace":"<namespace>","heldMillis":<ms>}`); err != nil {
		return HeldReport{}, err
	}
	problems := nameProblems(rep.Svc, rep.Namespace)
	if rep.HeldMillis < 0 || rep.HeldMillis > MaxHeld.Milliseconds() {
		problems = append(problems, fmt.Sprintf(`"heldMillis" must be from 0 to %d`, MaxHeld.Milliseconds()))
	}
	if len(problems) > 0 {
		return HeldReport{}, errors.New(strings.Join(problems, "; "))
	}
	return rep, nil
}

// decodeOne reads one JSON value of at most MaxBodyBytes from r into v;
// want shows the expected body in the error.
func decodeOne(r io.Reader, v any, want string) error {
	body, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON, want %s: %w", want, err)
	}
	if dec.More() {
		return errors.New("malformed JSON: more than one value in the body")
	}
	return nil
}

// nameProblems says what is wrong with a body's Service and namespace
// names.
func nameProblems(svc, namespace string) []string {
	var problems []string
	if svc == "" {
		problems = append(problems, `"svc" is required`)
	} else if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf(`"svc" %s is not a Service name: %s`, quoteShort(svc), strings.Join(errs, "; ")))
	}
	if namespace == "" {
		problems = append(problems, `"namespace" is required`)
	} else if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf(`"namespace" %s is not a namespace name: %s`, quoteShort(namespace), strings.Join(errs, "; ")))
	}
	return problems
}

// quoteShort quotes s cut to about 80 bytes of quoted text: the error goes
// back to the caller and into the log, and escapes make binary input four
// times longer.
func quoteShort(s string) string {
	const limit = 80
	q := strconv.Quote(s)
	if len(q) <= limit {
		return q
	}
	return strings.ToValidUTF8(q[:limit], "") + `…"`
}

// Wake requests may carry a shared token (see pkg/waketoken), as
// "Authorization: Bearer <token>" (RFC 6750). KubeElasti's resolver sends
// none, so an operator only asks for one when it is configured to.
const (
	authorizationHeader = "Authorization"
	bearerScheme        = "Bearer"
	// Realm names the protected endpoint in a challenge.
	Realm = "elasti-operator"
)

// SetBearer makes h carry token; an empty token leaves h alone.
func SetBearer(h http.Header, token string) {
	if token != "" {
		h.Set(authorizationHeader, bearerScheme+" "+token)
	}
}

// Bearer returns the token h carries, and whether it carries one. The
// scheme is matched case-insensitively, as RFC 9110 asks.
func Bearer(h http.Header) (string, bool) {
	scheme, token, ok := strings.Cut(h.Get(authorizationHeader), " ")
	if !ok || !strings.EqualFold(scheme, bearerScheme) {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Challenge is the WWW-Authenticate value of a 401 answer to a request
// with headers h: a request that carried a token is told it was invalid
// (RFC 6750 section 3.1); one without is only told to send one.
func Challenge(h http.Header) string {
	c := bearerScheme + ` realm="` + Realm + `"`
	if _, ok := Bearer(h); ok {
		c += `, error="invalid_token"`
	}
	return c
}
