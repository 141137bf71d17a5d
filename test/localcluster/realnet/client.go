package realnet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/elasti-dev/elasti/test/localcluster/podnet"
	"github.com/elasti-dev/elasti/test/localcluster/procnode"
)

// clientEnv carries a request to the re-executed binary that sends it from
// inside a client sandbox.
const clientEnv = "ELASTI_REALNET_CLIENT_REQUEST"

// maxBody bounds the body a client reports back.
const maxBody = 64 << 10

// Request is one HTTP request from a client pod.
type Request struct {
	Method string            `json:"method,omitempty"`
	URL    string            `json:"url"`
	Host   string            `json:"host,omitempty"` // overrides the Host header
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
	// Timeout bounds the whole request; default 30 s. With Repeat it
	// bounds each request.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Repeat sends the request this many times more, one after another on
	// kept-alive connections, and reports each one's duration in
	// Response.Repeats (for latency figures without a process start per
	// request). It stops at the first failure.
	Repeat int `json:"repeat,omitempty"`
	// Parallel sends this many copies of the request at once, each on a
	// connection of its own (a burst of clients), and reports each one in
	// Response.Parallel. "{i}" in the URL becomes the copy's index.
	Parallel int `json:"parallel,omitempty"`
	// Protocol is "" for HTTP/1.1 (or TLS, for an https URL), ProtocolH2C
	// for HTTP/2 with prior knowledge, as gRPC clients speak, or
	// ProtocolTCP for a raw connection to the URL's host:port that sends
	// Body, half-closes and reads the answer to EOF.
	Protocol string `json:"protocol,omitempty"`
	// KeepOpen, with ProtocolTCP, does not half-close after Body (which
	// may be empty): the client goes silent and reads until the peer
	// closes the connection or Timeout ends. Response.Closed says when the
	// peer closed it; a timeout is not an error then. It is a client that
	// trickles or stalls, for the servers' idle bounds.
	KeepOpen bool `json:"keepOpen,omitempty"`
	// ResetAfter, with KeepOpen, ends the wait this long after Body was
	// sent by closing the connection with a reset (RST), as a client that
	// gives up does; the peer closing first ends it too.
	ResetAfter time.Duration `json:"resetAfter,omitempty"`
}

// Phases are the times, from a request's start, at which its steps ended;
// zero for a step that did not happen.
type Phases struct {
	DNS       time.Duration `json:"dns,omitempty"`
	Connected time.Duration `json:"connected,omitempty"`
	Sent      time.Duration `json:"sent,omitempty"`
}

func (p Phases) String() string {
	return fmt.Sprintf("dns %s, connected %s, sent %s", p.DNS.Round(time.Millisecond), p.Connected.Round(time.Millisecond), p.Sent.Round(time.Millisecond))
}

// Request protocols.
const (
	ProtocolH2C = "h2c"
	ProtocolTCP = "tcp"
)

// Response is what the client pod saw. Err is set when no HTTP answer
// came (DNS failure, refused, timeout).
type Response struct {
	Status     int           `json:"status"`
	Header     http.Header   `json:"header,omitempty"`
	Body       string        `json:"body,omitempty"`
	Err        string        `json:"err,omitempty"`
	RemoteAddr string        `json:"remoteAddr,omitempty"`
	Duration   time.Duration `json:"duration"`
	// Repeats are the durations of the Request.Repeat extra requests.
	Repeats []time.Duration `json:"repeats,omitempty"`
	// Parallel are the answers to a Request.Parallel burst, in index order.
	Parallel []Response `json:"parallel,omitempty"`
	// Phases say when, from the start, the name was resolved, the
	// connection was up and the request was sent; the rest of Duration is
	// the server's. They tell a slow answer from a slow network.
	Phases Phases `json:"phases"`
	// Trailer holds the HTTP trailers (gRPC's status travels in them).
	Trailer http.Header `json:"trailer,omitempty"`
	// PeerCertificate is the SHA-256 of the certificate the server showed
	// over TLS, in hex.
	PeerCertificate string `json:"peerCertificate,omitempty"`
	// Closed is when, from the start, the peer closed a KeepOpen
	// connection (an EOF or a reset); zero if it did not.
	Closed time.Duration `json:"closed,omitempty"`
}

func (r Response) String() string {
	if r.Err != "" {
		// The phases tell where a timeout stuck: the name, the connect, or
		// the server's answer.
		return fmt.Sprintf("error after %s (%s%s): %s", r.Duration.Round(time.Millisecond), r.Phases, r.remote(), r.Err)
	}
	body := r.Body
	if len(body) > 300 {
		body = body[:300] + "…"
	}
	if r.Status == 0 {
		// A raw TCP connection: no status, and maybe closed by the peer.
		closed := "not closed by the peer"
		if r.Closed > 0 {
			closed = "closed by the peer after " + r.Closed.Round(time.Millisecond).String()
		}
		return fmt.Sprintf("TCP to %s, %s, %s (%s): %q", r.RemoteAddr, closed, r.Duration.Round(time.Millisecond), r.Phases, strings.TrimSpace(body))
	}
	return fmt.Sprintf("%d from %s after %s (%s): %q", r.Status, r.RemoteAddr, r.Duration.Round(time.Millisecond), r.Phases, strings.TrimSpace(body))
}

func (r Response) remote() string {
	if r.RemoteAddr == "" {
		return ""
	}
	return ", to " + r.RemoteAddr
}

// Client sends requests from a client pod: a sandbox of its own in the
// pod network whose resolv.conf points at the cluster DNS with the search
// path of a pod in Namespace, so "http://web/" means what it means in a
// pod there.
type Client struct {
	Namespace string
	sandbox   *podnet.Sandbox
	release   func()
	resolv    string
}

// Client makes a client pod in namespace. Close it when done.
func (n *Net) Client(ctx context.Context, namespace string) (*Client, error) {
	sb, release, err := n.Node.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	resolv := filepath.Join(n.stateDir, "client-"+sb.Name+".resolv.conf")
	conf := procnode.ResolvConf(namespace, procnode.DefaultClusterDomain, procnode.DefaultDNSServer)
	if err := os.WriteFile(resolv, []byte(conf), 0o644); err != nil {
		release()
		return nil, err
	}
	return &Client{Namespace: namespace, sandbox: sb, release: release, resolv: resolv}, nil
}

// IP is the client pod's address.
func (c *Client) IP() string { return c.sandbox.IP }

// Close removes the client's sandbox.
func (c *Client) Close() {
	c.release()
	_ = os.Remove(c.resolv)
}

// Get is Do for a plain GET.
func (c *Client) Get(ctx context.Context, url string, timeout time.Duration) (Response, error) {
	return c.Do(ctx, Request{URL: url, Timeout: timeout})
}

// Do sends req from the client pod. The error is for the harness failing;
// what the network did is in the Response. The process that sends it is
// this binary again (see ClientMain), run in the sandbox with its own
// mount namespace so /etc/resolv.conf is the pod's.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	if req.Timeout <= 0 {
		req.Timeout = 30 * time.Second
	}
	spec, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	// Burst copies run at once; repeats one after another.
	stdout, stderr, err := c.exec(ctx, time.Duration(1+req.Repeat)*req.Timeout+10*time.Second, clientEnv+"="+string(spec))
	if err != nil {
		return Response{}, err
	}
	var resp Response
	if err := json.Unmarshal(stdout, &resp); err != nil {
		return Response{}, fmt.Errorf("client pod %s: bad answer %q: %w (stderr %s)", c.sandbox.Name, stdout, err, stderr)
	}
	return resp, nil
}

// exec runs this binary again in the client's sandbox, with its own mount
// namespace so /etc/resolv.conf is the pod's, and env added to its
// environment; it returns what the process printed on stdout and stderr.
// limit bounds the process.
func (c *Client) exec(ctx context.Context, limit time.Duration, env ...string) (stdout []byte, stderr string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	const script = `mount -t tmpfs -o mode=0755 realnet /run && mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", c.sandbox.Name, "/bin/sh", "-c", script, "client", c.resolv, self)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("client pod %s: %w: %s", c.sandbox.Name, err, strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), errOut.String(), nil
}

// ClientMain sends the request a Client passed in the environment, or runs
// the Program it named, prints the outcome as JSON and exits; without
// either it returns at once. Call it first thing in TestMain (or main) of
// every binary that uses Client.
func ClientMain() {
	if name, ok := os.LookupEnv(programEnv); ok {
		runProgram(name)
	}
	spec, ok := os.LookupEnv(clientEnv)
	if !ok {
		return
	}
	var req Request
	if err := json.Unmarshal([]byte(spec), &req); err != nil {
		fmt.Fprintf(os.Stderr, "bad request: %v\n", err)
		os.Exit(2)
	}
	client := &http.Client{Transport: newTransport(req.Protocol)}
	if req.Parallel > 0 {
		_ = json.NewEncoder(os.Stdout).Encode(burst(req))
		os.Exit(0)
	}
	resp := send(client, req)
	for i := 0; i < req.Repeat && resp.Err == "" && resp.Status < 500; i++ {
		again := send(client, req)
		if again.Err != "" || again.Status >= 500 {
			resp.Err = fmt.Sprintf("repeat %d: %s", i+1, again)
			break
		}
		resp.Repeats = append(resp.Repeats, again.Duration)
	}
	_ = json.NewEncoder(os.Stdout).Encode(resp)
	os.Exit(0)
}

func newTransport(protocol string) *http.Transport {
	t := &http.Transport{
		Proxy:           nil,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test client; callers assert certificates themselves
	}
	if protocol == ProtocolH2C {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// burst sends req.Parallel copies of req at once, each from a client of
// its own.
func burst(req Request) Response {
	start := time.Now()
	out := make([]Response, req.Parallel)
	var wg sync.WaitGroup
	for i := range out {
		one := req
		one.URL = strings.ReplaceAll(req.URL, "{i}", strconv.Itoa(i))
		wg.Go(func() { out[i] = send(&http.Client{Transport: newTransport(req.Protocol)}, one) })
	}
	wg.Wait()
	return Response{Parallel: out, Duration: time.Since(start)}
}

func send(client *http.Client, req Request) Response {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout)
	defer cancel()
	var resp Response
	finish := func(err error) Response {
		resp.Duration = time.Since(start)
		if err != nil {
			resp.Err = err.Error()
		}
		return resp
	}
	if req.Protocol == ProtocolTCP {
		return finish(sendTCP(ctx, start, req, &resp))
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	r, err := http.NewRequestWithContext(ctx, method, req.URL, body)
	if err != nil {
		return finish(err)
	}
	if req.Host != "" {
		r.Host = req.Host
	}
	for k, v := range req.Header {
		r.Header.Set(k, v)
	}
	r = r.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		DNSDone:      func(httptrace.DNSDoneInfo) { resp.Phases.DNS = time.Since(start) },
		ConnectDone:  func(string, string, error) { resp.Phases.Connected = time.Since(start) },
		GotConn:      func(info httptrace.GotConnInfo) { resp.RemoteAddr = info.Conn.RemoteAddr().String() },
		WroteRequest: func(httptrace.WroteRequestInfo) { resp.Phases.Sent = time.Since(start) },
	}))
	hr, err := client.Do(r)
	if err != nil {
		return finish(err)
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	resp.Status, resp.Header, resp.Body, resp.Trailer = hr.StatusCode, hr.Header, string(b), hr.Trailer
	if hr.TLS != nil && len(hr.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(hr.TLS.PeerCertificates[0].Raw)
		resp.PeerCertificate = hex.EncodeToString(sum[:])
	}
	return finish(err)
}

// sendTCP connects to req.URL's host:port, sends req.Body, half-closes
// and reads the answer to EOF into resp.Body; with req.KeepOpen it does
// not half-close (see waitPeerClose). start is the request's.
func sendTCP(ctx context.Context, start time.Time, req Request, resp *Response) error {
	u, err := url.Parse(req.URL)
	if err != nil {
		return err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	resp.RemoteAddr = c.RemoteAddr().String()
	deadline, _ := ctx.Deadline() // send always sets one
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, req.Body); err != nil {
		return err
	}
	if req.KeepOpen {
		return waitPeerClose(c.(*net.TCPConn), start, deadline, req.ResetAfter, resp)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(c, maxBody))
	resp.Body = string(b)
	return err
}

// waitPeerClose reads from c, its write side open, into resp.Body until
// the peer closes c (then resp.Closed is set) or deadline, c's own,
// passes; a timeout is no error, it is what a client that stalls sees.
// With resetAfter, it stops waiting that long from now, if that comes
// first, and closes c with a reset. start is the request's.
func waitPeerClose(c *net.TCPConn, start, deadline time.Time, resetAfter time.Duration, resp *Response) error {
	reset := false
	if at := time.Now().Add(resetAfter); resetAfter > 0 && at.Before(deadline) {
		_ = c.SetReadDeadline(at)
		reset = true
	}
	b, err := io.ReadAll(io.LimitReader(c, maxBody))
	resp.Body = string(b)
	var ne net.Error
	switch {
	case err == nil || errors.Is(err, syscall.ECONNRESET):
		resp.Closed = time.Since(start)
		return nil
	case errors.As(err, &ne) && ne.Timeout():
		if reset {
			_ = c.SetLinger(0) // the deferred Close sends a reset
		}
		return nil
	}
	return err
}
