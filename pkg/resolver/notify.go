package resolver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/wakeapi"
)

// operatorNotifier POSTs KubeElasti's scale-up request to the operator.
type operatorNotifier struct {
	client  *http.Client
	url     string
	timeout time.Duration
	// token, when set, is sent with every POST.
	token   TokenSource
	metrics *Metrics
	// lastFailureLog is when a failed POST was last logged at the default
	// verbosity, as nanoseconds since created (monotonic, unlike the wall
	// clock); see notify.
	lastFailureLog atomic.Int64
	created        time.Time
}

// failureLogEvery bounds how often a failed POST is logged at the default
// verbosity. While the operator is unreachable or refuses, the retry loop
// of every held Service fails every few seconds; one line in this long
// says that requests are held and why, the rest go to -v=2.
const failureLogEvery = 10 * time.Second

func newOperatorNotifier(cfg Config, client *http.Client, token TokenSource, metrics *Metrics) *operatorNotifier {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			Proxy:               nil, // never an HTTP proxy from the environment
			DialContext:         (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return &operatorNotifier{client: client, url: strings.TrimRight(cfg.OperatorURL, "/") + wakeapi.Path,
		timeout: cfg.OperatorTimeout, token: token, metrics: metrics, created: time.Now()}
}

// notify POSTs once and returns the outcome label. ctx ends on shutdown.
func (n *operatorNotifier) notify(ctx context.Context, logger klog.Logger, svc ServiceRef) string {
	outcome, err := n.post(ctx, svc)
	if ctx.Err() != nil {
		return outcome // shutting down: neither counted nor logged
	}
	n.metrics.Notifications.WithLabelValues(outcome).Inc()
	switch {
	case outcome == OutcomeUnauthorized:
		// Nothing wakes until the tokens agree, so this is an error at any
		// verbosity.
		logger.Error(err, "The operator refused the wake token; check that --wake-token-file holds the same token on the resolver and the operator",
			"tokenSent", n.token != nil)
	case err != nil:
		now := int64(time.Since(n.created))
		last := n.lastFailureLog.Load()
		if (last == 0 || now-last >= int64(failureLogEvery)) && n.lastFailureLog.CompareAndSwap(last, max(now, 1)) {
			logger.Info("Notifying operator failed; held requests wait until it accepts (further failures within this long are logged at -v=2)",
				"outcome", outcome, "err", err, "within", failureLogEvery)
			break
		}
		logger.V(2).Info("Notifying operator failed", "outcome", outcome, "err", err)
	default:
		logger.V(4).Info("Notified operator")
	}
	return outcome
}

func (n *operatorNotifier) post(ctx context.Context, svc ServiceRef) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(wakeapi.Encode(svc.Namespace, svc.Name)))
	if err != nil {
		return OutcomeUnreachable, err
	}
	req.Header.Set("Content-Type", "application/json")
	if n.token != nil {
		wakeapi.SetBearer(req.Header, n.token.Current(ctx))
	}
	resp, err := n.client.Do(req)
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
