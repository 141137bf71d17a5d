package wakeapi

import (
	"strings"
	"testing"
)

func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"count":1,"svc":"web","namespace":"shop"}`,
		`{"svc":"web"}`, `{`, `[]`, `null`, `{"count":-1,"svc":"a","namespace":"b"}`,
		`{"count":1e999,"svc":"web","namespace":"shop"}`, `{"svc":"web","namespace":"shop"} {}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req, err := DecodeRequest(strings.NewReader(body))
		if err != nil {
			return
		}
		// Whatever is accepted is a usable lookup key.
		if req.Svc == "" || req.Namespace == "" || req.Count < 0 {
			t.Fatalf("accepted an unusable request %+v from %q", req, body)
		}
	})
}
