// Package clusterviewtest runs the cluster view over fake clientsets, for
// the tests of the packages above it, and serves a starting app that a
// slice lists as a not-ready endpoint.
package clusterviewtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
	"github.com/elasti-dev/elasti/pkg/podcheck/podchecktest"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// StartEndpoints runs an clusterview.InformerEndpoints over client until the test
// ends, with the command's cache transform, vouching for resolver slices
// by the ElastiServices ess as the command's clusterview.NamedIndex does.
func StartEndpoints(t testing.TB, client *fake.Clientset, ess ...*elastiv1alpha1.ElastiService) *clusterview.InformerEndpoints {
	t.Helper()
	e, _ := StartEndpointsOf(t, client, nil, ess...)
	return e
}

// StartEndpointsOf is StartEndpoints for a resolver that serves namespaces
// (all when empty); it also returns the clusterview.NamedIndex that vouches.
func StartEndpointsOf(t testing.TB, client *fake.Clientset, namespaces []string, ess ...*elastiv1alpha1.ElastiService) (*clusterview.InformerEndpoints, *clusterview.NamedIndex) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var objs []runtime.Object
	for _, es := range ess {
		objs = append(objs, es)
	}
	elastiClient := elastifake.NewSimpleClientset(objs...)
	budget := clusterview.NewSpecBudget(nsbudget.Limits{}, namespaces)
	elastiFactory := elastiinformers.NewSharedInformerFactoryWithOptions(elastiClient, 0, elastiinformers.WithTransform(budget.Transform))
	named, err := clusterview.NewNamedIndex(elastiFactory.Elasti().V1alpha1().ElastiServices())
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(clusterview.TrimForCache))
	e, err := clusterview.NewInformerEndpoints(ctx, factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), named, clusterview.DefaultFrontDrain)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	elastiFactory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown(); elastiFactory.Shutdown() })
	factory.WaitForCacheSync(ctx.Done())
	elastiFactory.WaitForCacheSync(ctx.Done())
	resolvertest.Eventually(t, 5*time.Second, "handlers synced", e.HasSynced)
	return e, named
}

// StartingApp is a pod's app on a loopback address: it listens at once,
// answers 503 on /ready until ready is set, and "pod" elsewhere. It
// counts what it is sent.
type StartingApp struct {
	IP        string
	Port      int32
	Ready     atomic.Bool
	Checks    atomic.Int32
	Requests  atomic.Int32
	EarlyHits atomic.Int32 // requests other than /ready while /ready answers 503
}

// NewStartingApp serves a StartingApp at ip until the test ends.
func NewStartingApp(t *testing.T, ip string) *StartingApp {
	a := &StartingApp{IP: ip}
	_, a.Port = podchecktest.Serve(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			a.Checks.Add(1)
			if !a.Ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		a.Requests.Add(1)
		if !a.Ready.Load() {
			a.EarlyHits.Add(1)
		}
		_, _ = fmt.Fprint(w, "pod")
	}))
	return a
}

// Addr is the app's host:port.
func (a *StartingApp) Addr() string { return net.JoinHostPort(a.IP, strconv.Itoa(int(a.Port))) }

// Pod is the app's pod, of that name and UID, whose readiness probe
// GETs /ready every 10 s.
func (a *StartingApp) Pod(name string, uid types.UID) *corev1.Pod {
	p := podchecktest.Pod(a.IP, a.Port, podchecktest.HTTPProbe("/ready", intstr.FromString("web")), nil)
	p.Name, p.UID = name, uid
	p.Spec.Containers[0].ReadinessProbe.PeriodSeconds = 10
	return p
}

// Endpoint is the not-ready endpoint a slice lists for the app's pod.
func (a *StartingApp) Endpoint(name string, uid types.UID) clusterview.UnreadyEndpoint {
	return clusterview.UnreadyEndpoint{IP: a.IP, Port: a.Port, Pod: name, UID: uid}
}
