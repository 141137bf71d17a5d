package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/command/commandtest"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// The resolver's apiserver connection dies under a held request without
// being closed (a NAT entry or load balancer gone): its watches hear
// nothing, and the slice that lists the woken pod Ready never reaches
// it. Its connections' health check finds the dead one within
// command.APIServerReadIdleTimeout + APIServerPingTimeout; the watches
// reconnect and relist, and the held request is answered well inside the
// stack's 30 s hold. With client-go's default check (30 s + 15 s) it was
// answered 504 at the hold's end (issue 39, item 5).
func TestHeldRequestIsAnsweredAfterTheResolversAPIServerConnectionDies(t *testing.T) {
	t.Parallel()
	api, err := url.Parse(clustertest.Get(t).RESTConfig().Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := commandtest.NewFreezingProxy(t, api.Host)
	s := newStackWith(t, func(cfg *rest.Config) { cfg.Host = "https://" + proxy.Addr() })
	s.Fronted("web", 0)
	// The woken pod waits for a node until the test lets it run: by then
	// the request is held and the resolver's connection dead.
	setSchedulable := func(ok bool) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := s.Kube.AppsV1().Deployments(s.NS).Get(s.Ctx(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ok {
				d.Spec.Template.Spec.NodeSelector = nil
			} else {
				d.Spec.Template.Spec.NodeSelector = map[string]string{"elasti.test/no-such-node": "true"}
			}
			_, err = s.Kube.AppsV1().Deployments(s.NS).Update(s.Ctx(), d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setSchedulable(false)

	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.ResolverURL+"/echo", nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		req.Host = s.host("web", 80)
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		answered <- answer{resp, err}
	}()
	// The operator scaled the target up: the resolver holds the request
	// and asked for the wake.
	s.Eventually("the held request's wake", func() (bool, string) {
		d, err := s.Kube.AppsV1().Deployments(s.NS).Get(s.Ctx(), "web", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas > 0, fmt.Sprint(err)
	})
	proxy.Freeze()
	froze := time.Now()
	setSchedulable(true)
	a := <-answered
	if a.err != nil {
		t.Fatal(a.err)
	}
	got := decodeEcho(t, a.resp)
	took := time.Since(froze)
	if ready := s.ReadyPodIPs("web"); !slices.Contains(ready, got.ServedBy) {
		t.Errorf("served by %q; the woken pods are %v", got.ServedBy, ready)
	}
	t.Logf("the held request was answered %v after the resolver's apiserver connection died (health check: %v idle, %v ping)",
		took.Round(100*time.Millisecond), command.APIServerReadIdleTimeout, command.APIServerPingTimeout)
}
