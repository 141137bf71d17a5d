package wakeapi

import (
	"bytes"
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
