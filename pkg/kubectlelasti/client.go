package kubectlelasti

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elasti-dev/elasti/pkg/command"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
)

// RESTConfig is the client configuration kubectl's flags in f describe:
// --kubeconfig, else the files $KUBECONFIG lists, else ~/.kube/config
// (else in-cluster), overridden by --context, --cluster, --user, --server,
// --token, --as and the rest, and the namespace from -n, else the
// context's, else default. Its Timeout is --request-timeout, else
// requestTimeout.
func RESTConfig(f *genericclioptions.ConfigFlags) (*rest.Config, string, error) {
	loader := f.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, "", errors.New("no kubeconfig: set KUBECONFIG, pass --kubeconfig=PATH, or write ~/.kube/config")
	case err != nil:
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	cfg.UserAgent = "kubectl-elasti/" + command.Version()
	// Every call but a watch is a short read or write; none may hang a
	// --wait past its --timeout for long.
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	return cfg, ns, nil
}

// Connect makes the clients kubectl's flags in f describe (RESTConfig).
func Connect(f *genericclioptions.ConfigFlags) (*Clients, error) {
	cfg, ns, err := RESTConfig(f)
	if err != nil {
		return nil, err
	}
	clock := &serverClock{}
	cfg.Wrap(clock.wrap)
	c := &Clients{Namespace: ns, ServerNow: clock.Now}
	if c.Elasti, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	// A watch lasts as long as the command waits; status --watch, as
	// kubectl get --watch, ends after --request-timeout when it is given.
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	if f.Timeout != nil && *f.Timeout != "" && *f.Timeout != "0" {
		c.WatchTimeout = cfg.Timeout
	}
	if c.ElastiWatch, err = versioned.NewForConfig(watchCfg); err != nil {
		return nil, err
	}
	return c, nil
}

// requestTimeout bounds one API call.
const requestTimeout = 30 * time.Second

// serverClock estimates the apiserver's clock from the Date header of its
// latest response. A sleep request is compared with times the operator
// stamps, and the operator's clock is the cluster's, not the laptop's the
// plugin may run on.
type serverClock struct {
	mu       sync.Mutex
	date     time.Time // the latest Date header
	received time.Time // when it came, by the local clock
}

func (c *serverClock) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				c.mu.Lock()
				c.date, c.received = date, time.Now()
				c.mu.Unlock()
			}
		}
		return resp, err
	})
}

// Now is the apiserver's time as last seen plus the time since; the local
// clock before any response. The Date header has whole seconds, so it may
// be up to a second behind.
func (c *serverClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.date.IsZero() {
		return time.Now()
	}
	return c.date.Add(time.Since(c.received))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// apiCall names one API request, so that its failure says what was
// refused: kubectl's own messages name the verb and the resource.
type apiCall struct {
	verb      string // get, list, patch
	resource  string // plural, with a subresource: deployments/scale
	kind      string // singular for "not found": elastiservice
	name      string
	namespace string // empty: all namespaces
}

// explain turns err into the message the user sees.
func (c apiCall) explain(err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("in namespace %q", c.namespace)
	if c.namespace == "" {
		where = "in any namespace"
	}
	var status apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	switch {
	case apierrors.IsNotFound(err) && c.name != "":
		return fmt.Errorf("%s %q not found %s", c.kind, c.name, where)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the server has no %s: is elasti's CRD installed? (%s)", c.resource, msg)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden: you may not %s %s %s (%s)", c.verb, c.resource, where, msg)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized: the cluster did not accept the kubeconfig's credentials (%s)", msg)
	}
	target := c.resource
	if c.name != "" {
		target += " " + c.name
	}
	return fmt.Errorf("%s %s %s: %w", c.verb, target, where, err)
}
