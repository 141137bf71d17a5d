package wakeapi

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// KubeElasti's operator and existing resolvers agree on these exact bytes.
func TestEncodeIsKubeElastisBodyAndDecodesBack(t *testing.T) {
	body := Encode("shop", "web")
	if want := `{"count":1,"svc":"web","namespace":"shop"}`; string(body) != want {
		t.Fatalf("Encode = %s, want %s", body, want)
	}
	req, err := DecodeRequest(bytes.NewReader(body))
	if err != nil || req != (Request{Count: 1, Svc: "web", Namespace: "shop"}) {
		t.Fatalf("DecodeRequest(Encode) = %+v, %v", req, err)
	}
}

func TestBearerRoundTripAndChallenge(t *testing.T) {
	h := http.Header{}
	SetBearer(h, "")
	if _, ok := Bearer(h); ok || h.Get("Authorization") != "" {
		t.Fatalf("an empty token set a header: %v", h)
	}
	if got := Challenge(h); got != `Bearer realm="elasti-operator"` {
		t.Errorf("challenge without a token = %q", got)
	}
	SetBearer(h, "s3cr3t")
	if got := h.Get("Authorization"); got != "Bearer s3cr3t" {
		t.Fatalf("Authorization = %q, want %q", got, "Bearer s3cr3t")
	}
	if tok, ok := Bearer(h); !ok || tok != "s3cr3t" {
		t.Errorf("Bearer = %q, %v", tok, ok)
	}
	if got := Challenge(h); got != `Bearer realm="elasti-operator", error="invalid_token"` {
		t.Errorf("challenge with a token = %q", got)
	}
	for _, v := range []string{"bearer s3cr3t", "BEARER  s3cr3t"} {
		if tok, ok := Bearer(http.Header{"Authorization": {v}}); !ok || tok != "s3cr3t" {
			t.Errorf("Bearer(%q) = %q, %v; the scheme is case-insensitive", v, tok, ok)
		}
	}
	for _, v := range []string{"Basic czNjcjN0", "Bearer", "Bearer ", "s3cr3t"} {
		if tok, ok := Bearer(http.Header{"Authorization": {v}}); ok {
			t.Errorf("Bearer(%q) = %q, want no token", v, tok)
		}
	}
}

// The limit is on the bytes sent, whatever they hold: a valid body padded
// to the limit is accepted, one byte more is ErrTooLarge, and the reader is
// never read far past the limit.
func TestBodyLimit(t *testing.T) {
	valid := `{"count":1,"svc":"web","namespace":"shop"}`
	atLimit := valid + strings.Repeat(" ", MaxBodyBytes-len(valid))
	if _, err := DecodeRequest(strings.NewReader(atLimit)); err != nil {
		t.Fatalf("a %d-byte body: %v", len(atLimit), err)
	}
	if _, err := DecodeRequest(strings.NewReader(atLimit + " ")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a %d-byte body: %v, want ErrTooLarge", len(atLimit)+1, err)
	}
	endless := &countingReader{}
	if _, err := DecodeRequest(endless); !errors.Is(err, ErrTooLarge) || endless.n > 2*MaxBodyBytes {
		t.Fatalf("an endless body: %v after reading %d bytes", err, endless.n)
	}
}

// countingReader is an endless body of spaces.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	c.n += len(p)
	return len(p), nil
}

// Malformed bodies are refused with a message that says what is wrong and
// what is wanted, without repeating a long value in full.
func TestDecodeErrorsAreClear(t *testing.T) {
	for body, want := range map[string]string{
		`{`:                                           `malformed JSON, want {"count":1,"svc":"<service>","namespace":"<namespace>"}`,
		`{"svc":"web","namespace":"shop"} {}`:         "more than one value",
		`{"namespace":"shop"}`:                        `"svc" is required`,
		`{"svc":"web"}`:                               `"namespace" is required`,
		`{"svc":"Web","namespace":"shop"}`:            `"svc" "Web" is not a Service name`,
		`{"svc":"web","namespace":"a/b"}`:             `"namespace" "a/b" is not a namespace name`,
		`{"svc":"web","namespace":"shop","count":-1}`: `"count" must not be negative`,
		`{"svc":"` + strings.Repeat("x", 5000) + `","namespace":"shop"}`: "…",
	} {
		_, err := DecodeRequest(strings.NewReader(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeRequest(%.40q) = %v, want an error containing %q", body, err, want)
		}
		if err != nil && len(err.Error()) > maxErrorBytes {
			t.Errorf("DecodeRequest(%.40q): %d-byte error", body, len(err.Error()))
		}
	}
}
