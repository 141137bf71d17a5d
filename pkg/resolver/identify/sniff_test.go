package identify

import "testing"

func TestHTTPPrefix(t *testing.T) {
	for in, want := range map[string]prefixVerdict{
		"GET / HTTP/1.1": prefixHTTP, "POST ": prefixHTTP, "PRI * HTTP/2.0\r\n": prefixHTTP,
		"G": prefixUndecided, "PO": prefixUndecided, "PRI * HT": prefixUndecided,
		"hello": prefixOther, "\x16\x03\x01": prefixOther, "get /": prefixOther, "GETX": prefixOther,
	} {
		if got := httpPrefix([]byte(in)); got != want {
			t.Errorf("httpPrefix(%q) = %v, want %v", in, got, want)
		}
	}
	if !isHTTPAppProtocol("kubernetes.io/h2c") || isHTTPAppProtocol("https") || isHTTPAppProtocol("mysql") {
		t.Error("isHTTPAppProtocol misjudges a known value")
	}
}
