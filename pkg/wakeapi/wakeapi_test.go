package wakeapi

import (
	"bytes"
	"net/http"
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
