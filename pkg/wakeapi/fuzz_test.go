package wakeapi

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxErrorBytes bounds a decode error: the scale endpoint sends it back and
// logs it, whatever the body held.
const maxErrorBytes = 1024

func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"count":1,"svc":"web","namespace":"shop"}`,
		`{"svc":"web"}`, `{`, `[]`, `null`, `{"count":-1,"svc":"a","namespace":"b"}`,
		`{"count":1e999,"svc":"web","namespace":"shop"}`, `{"svc":"web","namespace":"shop"} {}`,
		`{"count":1,"svc":"Web","namespace":"shop"}`, `{"count":1,"svc":"web","namespace":"Shop"}`,
		`{"count":1,"svc":"1web","namespace":"1shop"}`, `{"count":1,"svc":"../web","namespace":"shop"}`,
		`{"count":1,"svc":"web","namespace":"other/shop"}`, `{"count":1.5,"svc":"web","namespace":"shop"}`,
		`{"SVC":"web","NameSpace":"shop","count":1}`, `{"svc":"web","svc":"api","namespace":"shop"}`,
		`{"svc":"web","namespace":"shop","extra":{"deep":[1,2,3]}}`, `{"svc":"we\u0062","namespace":"shop"}`,
		`{"svc":"web\u0000","namespace":"shop"}`, `{"svc":"` + strings.Repeat("a", 64) + `","namespace":"shop"}`,
		`{"svc":"` + strings.Repeat("\\u00ff", 1000) + `","namespace":"shop"}`,
		`{"svc":"web","namespace":"shop"}` + strings.Repeat(" ", MaxBodyBytes),
		strings.Repeat("[", 10000), "\xff\xfe{}", "",
		// Escaped, these names once made a 1266-byte error.
		`{"svc":"` + strings.Repeat(`\u0001`, 100) + `","namespace":"` + strings.Repeat(`\u0001`, 100) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(bytes.NewReader(body))
		if len(body) > MaxBodyBytes {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("a %d-byte body gave %v, want ErrTooLarge", len(body), err)
			}
			return
		}
		if errors.Is(err, ErrTooLarge) {
			t.Fatalf("a %d-byte body is within the limit but gave %v", len(body), err)
		}
		if err != nil {
			if req != (Request{}) {
				t.Fatalf("failed decode returned %+v", req)
			}
			if n := len(err.Error()); n > maxErrorBytes {
				t.Fatalf("%d-byte error for a %d-byte body", n, len(body))
			}
			return
		}
		// Whatever is accepted names a Service that can exist.
		if errs := validation.IsDNS1035Label(req.Svc); len(errs) > 0 {
			t.Fatalf("accepted svc %q from %q: %v", req.Svc, body, errs)
		}
		if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
			t.Fatalf("accepted namespace %q from %q: %v", req.Namespace, body, errs)
		}
		if req.Count < 0 {
			t.Fatalf("accepted count %d", req.Count)
		}
		again, err := DecodeRequest(bytes.NewReader(body))
		if err != nil || again != req {
			t.Fatalf("decoding %q again gave %+v, %v", body, again, err)
		}
	})
}

// FuzzEncodeDecode: what a resolver sends for a valid Service decodes back
// to it exactly; for any other name the operator refuses the body rather
// than looking up something else.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range [][2]string{
		{"shop", "web"}, {"a", "b"}, {"kube-system", "x1"}, {"Shop", "web"}, {"shop", "Web"},
		{"", "web"}, {"shop", ""}, {"shop", "1web"}, {"1shop", "web"}, {"shop", "web\""},
		{"shop", `web","namespace":"other`}, {"sh\u212aop", "web"}, {"shop", "web\x00"},
		{strings.Repeat("n", 63), strings.Repeat("s", 63)}, {strings.Repeat("n", 64), "web"},
		{"shop", strings.Repeat("w", MaxBodyBytes)},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, namespace, svc string) {
		body := Encode(namespace, svc)
		req, err := DecodeRequest(bytes.NewReader(body))
		valid := len(validation.IsDNS1035Label(svc)) == 0 && len(validation.IsDNS1123Label(namespace)) == 0
		switch {
		case valid && err != nil:
			t.Fatalf("Encode(%q, %q) = %s does not decode: %v", namespace, svc, body, err)
		case valid && req != (Request{Count: 1, Svc: svc, Namespace: namespace}):
			t.Fatalf("Encode(%q, %q) decodes to %+v", namespace, svc, req)
		case !valid && err == nil:
			t.Fatalf("Encode(%q, %q) = %s was accepted as %+v", namespace, svc, body, req)
		}
	})
}
