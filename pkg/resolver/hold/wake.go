package hold

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// TokenSource returns the current wake token; it is asked before every
// wake request, so a rotated token is sent as soon as it is read.
type TokenSource interface {
	Current(ctx context.Context) string
}

// WakeClient asks the operator to wake a Service: it POSTs KubeElasti's
// request to wakeapi.Path. It also reports held requests' waits to
// wakeapi.HeldPath (HeldReports).
type WakeClient struct {
	client *http.Client
	// url is the scale endpoint's, heldURL the held-request reports'.
	url, heldURL string
	timeout      time.Duration
	// token, when set, is sent with every wake request.
	token    TokenSource
	requests *prometheus.CounterVec
	// failureLog lets a failed wake request be logged at the default
	// verbosity at most once per failureLogEvery.
	failureLog rate.Sometimes
}

// failureLogEvery bounds how often a failed wake request is logged at the
// default verbosity. While the operator is unreachable or refuses, the
// wake loop of every held Service fails every few seconds; one line in this long
// says that requests are held and why, the rest go to -v=2.
const failureLogEvery = 10 * time.Second

// NewWakeClient returns the client of the operator at cfg.OperatorURL,
// counting its wake requests in m. client nil means a private client that
// ignores HTTP proxy environment variables; token nil sends no token.
func NewWakeClient(cfg Config, client *http.Client, token TokenSource, m Metrics) *WakeClient {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // never an HTTP proxy from the environment
			DialContext:         (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			// The operator's scale endpoint closes a client address's
			// connections past 64 (command.MaxConnectionsPerSource): many
			// Services waking at once wait here for a connection instead.
			MaxConnsPerHost: 32,
			IdleConnTimeout: 90 * time.Second,
		}}
	}
	base := strings.TrimRight(cfg.OperatorURL, "/")
	return &WakeClient{client: client, url: base + wakeapi.Path, heldURL: base + wakeapi.HeldPath,
		timeout: cfg.OperatorTimeout, token: token, requests: m.WakeRequests, failureLog: rate.Sometimes{Interval: failureLogEvery}}
}

// Wake POSTs one wake request for svc and returns the outcome label. ctx
// ends on shutdown.
func (c *WakeClient) Wake(ctx context.Context, logger klog.Logger, svc clusterview.ServiceRef) string {
	outcome, err := c.post(ctx, svc)
	if ctx.Err() != nil {
		return outcome // shutting down: neither counted nor logged
	}
	c.requests.WithLabelValues(outcome).Inc()
	switch {
	case outcome == OutcomeUnauthorized:
		// Nothing wakes until the tokens agree, so this is an error at any
		// verbosity.
		logger.Error(err, "The operator refused the wake token; check that --wake-token-file holds the same token on the resolver and the operator",
			"tokenSent", c.token != nil)
	case err != nil:
		logged := false
		c.failureLog.Do(func() {
			logger.Info("Wake request to the operator failed; held requests wait until it accepts (further failures within this long are logged at -v=2)",
				"outcome", outcome, "err", err, "within", failureLogEvery)
			logged = true
		})
		if !logged {
			logger.V(2).Info("Wake request to the operator failed", "outcome", outcome, "err", err)
		}
	default:
		logger.V(4).Info("Operator accepted the wake request")
	}
	return outcome
}

func (c *WakeClient) post(ctx context.Context, svc clusterview.ServiceRef) (string, error) {
	return c.send(ctx, c.url, wakeapi.Encode(svc.Namespace, svc.Name))
}

// reportHeld tells the operator that a request held for svc waited held
// (wakeapi.HeldPath).
func (c *WakeClient) reportHeld(ctx context.Context, svc clusterview.ServiceRef, held time.Duration) error {
	_, err := c.send(ctx, c.heldURL, wakeapi.EncodeHeld(svc.Namespace, svc.Name, held))
	return err
}

// send POSTs body to url, on the operator, with the wake token, within
// the operator timeout, and returns the outcome label.
func (c *WakeClient) send(ctx context.Context, url string, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return OutcomeUnreachable, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != nil {
		wakeapi.SetBearer(req.Header, c.token.Current(ctx))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return OutcomeUnreachable, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return OutcomeUnauthorized, fmt.Errorf("operator answered %s", resp.Status)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return OutcomeRejected, fmt.Errorf("operator answered %s", resp.Status)
	}
	return OutcomeSuccess, nil
}
