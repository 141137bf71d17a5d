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
	body, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return Request{}, fmt.Errorf("read body: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return Request{}, fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxBodyBytes)
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf(`malformed JSON, want {"count":1,"svc":"<service>","namespace":"<namespace>"}: %w`, err)
	}
	if dec.More() {
		return Request{}, errors.New("malformed JSON: more than one value in the body")
	}
	var problems []string
	if req.Svc == "" {
		problems = append(problems, `"svc" is required`)
	} else if errs := validation.IsDNS1035Label(req.Svc); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf(`"svc" %s is not a Service name: %s`, quoteShort(req.Svc), strings.Join(errs, "; ")))
	}
	if req.Namespace == "" {
		problems = append(problems, `"namespace" is required`)
	} else if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf(`"namespace" %s is not a namespace name: %s`, quoteShort(req.Namespace), strings.Join(errs, "; ")))
	}
	if req.Count < 0 {
		problems = append(problems, `"count" must not be negative`)
	}
	if len(problems) > 0 {
		return Request{}, errors.New(strings.Join(problems, "; "))
	}
	return req, nil
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
