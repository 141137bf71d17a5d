package resolver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestHeldRequestBytesCountsWhatAHoldKeeps(t *testing.T) {
	req, err := http.NewRequest("GET", "http://web.shop/path?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestURI = "/path?q=1"
	req.Header["Cookie"] = []string{"a=1", "b=22"}
	// 9 (target) + 8 (Host) + 2 × 6 (name) + 3 + 4 (values)
	const head = 9 + 8 + 12 + 7
	if got := heldRequestBytes(req, false); got != head {
		t.Fatalf("heldRequestBytes = %d, want %d", got, head)
	}
	// An HTTP/2 body that streams fills its stream window in memory; an
	// HTTP/1 one waits in the kernel, a buffered one has its own budget.
	req.Body, req.ContentLength = io.NopCloser(strings.NewReader("grpc")), -1
	if got := heldRequestBytes(req, false); got != head {
		t.Fatalf("HTTP/1 streaming body: %d, want %d", got, head)
	}
	req.ProtoMajor = 2
	if got := heldRequestBytes(req, false); got != head+serverMaxReceiveBufferPerStream {
		t.Fatalf("HTTP/2 streaming body: %d, want %d", got, head+serverMaxReceiveBufferPerStream)
	}
	if got := heldRequestBytes(req, true); got != head {
		t.Fatalf("HTTP/2 buffered body: %d, want %d", got, head)
	}
}
