package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

// httpPort is the app pods' port. One server listens on 0.0.0.0 inside the
// pod network, so it answers on every live pod IP and on no other.
const httpPort = 8080

// echo is what the app pods answer: what the backend saw.
type echo struct {
	Method     string      `json:"method"`
	Path       string      `json:"path"`
	Query      string      `json:"query"`
	Header     http.Header `json:"header"`
	BodySHA256 string      `json:"bodySHA256"`
	BodyBytes  int64       `json:"bodyBytes"`
	ServedBy   string      `json:"servedBy"`
}

func startBackends(n *podnet.Network) error {
	web, err := n.Listen("tcp", fmt.Sprintf("0.0.0.0:%d", httpPort))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		nBytes, _ := io.Copy(h, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header,
			BodySHA256: hex.EncodeToString(h.Sum(nil)), BodyBytes: nBytes, ServedBy: localIP(r),
		})
	})}
	go func() { _ = srv.Serve(web) }()
	return nil
}

func localIP(r *http.Request) string {
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		host, _, _ := net.SplitHostPort(addr.String())
		return host
	}
	return ""
}
