package realnet

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpServer listens on loopback and hands each connection to handle.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// A KeepOpen client does not half-close: a server that reads to EOF
// before it answers never answers it, and one that closes on its own is
// seen closing.
func TestKeepOpenSaysWhetherThePeerClosed(t *testing.T) {
	closing := tcpServer(t, func(c net.Conn) {
		defer c.Close()
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err == nil {
			_, _ = c.Write(b)
		}
	})
	resp := send(nil, Request{URL: closing, Protocol: ProtocolTCP, Body: "ping", KeepOpen: true, Timeout: 5 * time.Second})
	if resp.Err != "" || resp.Closed <= 0 || resp.Body != "ping" {
		t.Errorf("a server that answers and closes: %s, closed %v; want the answer and the close", resp, resp.Closed)
	}

	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	readsToEOF := tcpServer(t, func(c net.Conn) {
		defer c.Close()
		go func() { <-done; _ = c.Close() }()
		_, _ = io.Copy(io.Discard, c)
		_, _ = io.WriteString(c, "answer")
	})
	resp = send(nil, Request{URL: readsToEOF, Protocol: ProtocolTCP, Body: "ping", KeepOpen: true, Timeout: 300 * time.Millisecond})
	if resp.Err != "" || resp.Closed != 0 || resp.Body != "" {
		t.Errorf("a server that waits for the client's EOF: %s, closed %v; want no answer, no close and no error", resp, resp.Closed)
	}
}

// With ResetAfter the client gives up with a reset, which the server
// sees as one.
func TestResetAfterSendsAReset(t *testing.T) {
	seen := make(chan error, 1)
	addr := tcpServer(t, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c)
		seen <- err
	})
	resp := send(nil, Request{URL: addr, Protocol: ProtocolTCP, Body: "x", KeepOpen: true, ResetAfter: 100 * time.Millisecond, Timeout: 5 * time.Second})
	if resp.Err != "" || resp.Closed != 0 {
		t.Errorf("%s, closed %v; want the client to reset, without error", resp, resp.Closed)
	}
	if err := <-seen; !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the server read %v; want a reset", err)
	}
}
