package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/command"
)

// serveAdversarial runs serve, as the operator runs its health, metrics
// and scale servers, and returns the address it bound.
func serveAdversarial(t *testing.T, h http.Handler, writeTimeout time.Duration) string {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(ctx, "adversarial", "127.0.0.1:0", h, writeTimeout)
	}()
	t.Cleanup(func() { cancel(); <-done })
	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	serving := regexp.MustCompile(`"?Serving"? server="adversarial" address="(127\.0\.0\.1:[0-9]+)"`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := serving.FindStringSubmatch(buf.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Serving log:\n%s", buf.String())
		}
	}
}

// A client that asks for a large answer and never reads it is dropped at
// the write timeout: the handler's write fails and its connection closes,
// instead of both staying blocked for as long as the client stays.
func TestManagementServerDropsAClientThatDoesNotRead(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	writeErr := make(chan error, 1)
	addr := serveAdversarial(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("m", 64<<10))
		// 64 MiB: far more than the loopback socket buffers take, so the
		// writes block once they are full.
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}), writeTimeout)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing.
	select {
	case err := <-writeErr:
		if err == nil {
			t.Fatal("the handler wrote 64 MiB to a client that reads nothing")
		}
	case <-time.After(writeTimeout + 5*time.Second):
		t.Fatalf("the handler was still writing %v after the write timeout of %v", 5*time.Second, writeTimeout)
	}
	// The connection is gone: reading what was buffered ends in EOF or a
	// reset, not in a wait.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the connection of a client that did not read")
	}
}

// One client address can open MaxConnectionsPerSource connections, not
// one more; another address still connects and is answered.
func TestManagementServerCapsConnectionsPerSource(t *testing.T) {
	addr := serveAdversarial(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), command.WriteTimeout)
	_, port, _ := net.SplitHostPort(addr)
	dialFrom := func(src string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		return d.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
	}
	// get sends one request on c and reports whether it was answered.
	get := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	for i := range command.MaxConnectionsPerSource {
		c, err := dialFrom("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		// Answered: the connection is accepted and counted before the next.
		if !get(c) {
			t.Fatalf("connection %d of %d from one address was not served", i+1, command.MaxConnectionsPerSource)
		}
	}
	// Reset as soon as accepted: the dial itself may already see it.
	if past, err := dialFrom("127.0.0.1"); err == nil {
		open = append(open, past)
		if get(past) {
			t.Fatalf("connection %d from one address was served, past the cap of %d", command.MaxConnectionsPerSource+1, command.MaxConnectionsPerSource)
		}
	}
	other, err := dialFrom("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	open = append(open, other)
	if !get(other) {
		t.Fatal("a second address was refused while the first held its share")
	}
	// A slot given back is taken again.
	_ = open[0].Close()
	time.Sleep(100 * time.Millisecond)
	again, err := dialFrom("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	open = append(open, again)
	if !get(again) {
		t.Fatal("a connection closed did not give its slot back")
	}
}
