package operator_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/portalloc"
	"github.com/elasti-dev/elasti/test/testenv"
)

// multiPortApp creates a Deployment and a public Service with two TCP ports
// (one with an appProtocol) and a UDP port, which gets no resolver port.
func multiPortApp(e *testenv.Env, name string, replicas int32) {
	e.T.Helper()
	e.Deployment(name, replicas, nil)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "grpc", Port: 9000, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("kubernetes.io/h2c")},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
			},
		},
	}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// slicePortsOf returns the resolver slice's ports by name.
func slicePortsOf(e *testenv.Env, service string) (map[string]discoveryv1.EndpointPort, []string, error) {
	s, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).Get(e.Ctx(), names.ResolverSlice(service), metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	out := map[string]discoveryv1.EndpointPort{}
	for _, p := range s.Ports {
		out[ptr.Deref(p.Name, "")] = p
	}
	return out, testenv.SliceIPs(*s), nil
}

// waitSlicePorts waits until the resolver slice of service has exactly the
// named ports given (name → port), and returns them.
func waitSlicePorts(e *testenv.Env, service string, want map[string]int32) map[string]discoveryv1.EndpointPort {
	e.T.Helper()
	var got map[string]discoveryv1.EndpointPort
	e.Eventually(fmt.Sprintf("the resolver slice of %s to have ports %v", service, want), func() (bool, string) {
		var err error
		got, _, err = slicePortsOf(e, service)
		if err != nil {
			return false, err.Error()
		}
		have := map[string]int32{}
		for n, p := range got {
			have[n] = ptr.Deref(p.Port, 0)
		}
		return maps.Equal(have, want), fmt.Sprintf("%v", have)
	})
	return got
}

// resolverSlicesDeclare reports, for each Ready resolver pod IP, whether the
// EndpointSlice controller listed it in a slice with the per-port-routing
// port: what the operator bases its decision on, checked here against the
// real EndpointSlice controller rather than assumed.
func resolverSlicesDeclare(e *testenv.Env) map[string]bool {
	e.T.Helper()
	out := map[string]bool{}
	for _, s := range e.SlicesFor(testenv.ResolverName) {
		declares := slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool {
			return ptr.Deref(p.Name, "") == controller.ResolverPerPortRoutingPort && ptr.Deref(p.Port, 0) == testenv.PerPortRoutingPort
		})
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				for _, a := range ep.Addresses {
					out[a] = declares
				}
			}
		}
	}
	return out
}

// waitDeclarations waits until the resolver Service's slices list exactly
// the Ready pods of each app, declaring per-port routing as given.
func waitDeclarations(e *testenv.Env, apps map[string]bool) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("the EndpointSlice controller to publish the resolver pods %v", apps), func() (bool, string) {
		want := map[string]bool{}
		for app, declares := range apps {
			for _, ip := range e.ReadyPodIPs(app) {
				want[ip] = declares
			}
		}
		got := resolverSlicesDeclare(e)
		return len(want) > 0 && maps.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}

// (a) Ports are assigned in serve mode already, recorded in status, and in
// proxy mode the slice names them (with the Service port's appProtocol)
// when every resolver pod declares per-port routing.
func TestResolverPortsAssignedAndRoutedPerPort(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 2, true)
	waitDeclarations(e, map[string]bool{testenv.ResolverName: true})

	multiPortApp(e, "web", 1)
	e.ElastiService("web", "web", elastiv1alpha1.KindDeployment, "web")
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	ports := e.WaitResolverPorts("web", 80, 9000)
	for sp, rp := range ports {
		if !portalloc.DefaultRange.Contains(rp) {
			t.Errorf("Service port %d got resolver port %d, outside the default range %s", sp, rp, portalloc.DefaultRange)
		}
	}
	if ports[80] == ports[9000] {
		t.Errorf("both Service ports got %d", ports[80])
	}
	es := e.Get("web")
	if names := []string{es.Status.ResolverPorts[0].Name, es.Status.ResolverPorts[1].Name}; !slices.Equal(names, []string{"http", "grpc"}) ||
		es.Status.ResolverPorts[0].Service != "web" {
		t.Errorf("resolverPorts = %+v, want http and grpc of Service web", es.Status.ResolverPorts)
	}

	e.Scale(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	got := waitSlicePorts(e, "web", map[string]int32{"http": ports[80], "grpc": ports[9000]})
	if ap := got["grpc"].AppProtocol; ptr.Deref(ap, "") != "kubernetes.io/h2c" || got["http"].AppProtocol != nil {
		t.Errorf("appProtocol: grpc %v, http %v; want the Service ports' own", ap, got["http"].AppProtocol)
	}
	_, ips, err := slicePortsOf(e, "web")
	if err != nil || !slices.Equal(ips, e.ReadyPodIPs(testenv.ResolverName)) {
		t.Errorf("slice endpoints %v (%v), want the resolver pods %v", ips, err, e.ReadyPodIPs(testenv.ResolverName))
	}
	// Nothing moved: the same ports as in serve mode.
	if again := e.WaitResolverPorts("web", 80, 9000); !maps.Equal(again, ports) {
		t.Errorf("ports changed from %v to %v on the switch to proxy", ports, again)
	}
}

// (c) KubeElasti's resolver pods do not declare per-port routing: Services
// stay on Host routing on the proxy port, also while one of them is Ready
// next to elasti's (a rolling upgrade), and switch once the last one goes.
func TestHostRoutingUntilEveryResolverPodDeclares(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods("kubeelasti", 1, false)
	waitDeclarations(e, map[string]bool{"kubeelasti": false})

	e.Fronted("web", 0)
	ports := e.WaitResolverPorts("web", 80)
	waitSlicePorts(e, "web", map[string]int32{"http": testenv.ResolverProxyPort})

	// Mid upgrade: both kinds Ready. The slice follows the new pod (so the
	// operator has seen it) but stays on the proxy port.
	e.ResolverPods("elasti", 1, true)
	waitDeclarations(e, map[string]bool{"kubeelasti": false, "elasti": true})
	all := append(e.ReadyPodIPs("kubeelasti"), e.ReadyPodIPs("elasti")...)
	slices.Sort(all)
	e.Eventually("the slice to list both resolver pods", func() (bool, string) {
		_, ips, err := slicePortsOf(e, "web")
		return err == nil && slices.Equal(ips, all), fmt.Sprintf("%v %v", ips, err)
	})
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got, _, err := slicePortsOf(e, "web")
		if err != nil || ptr.Deref(got["http"].Port, 0) != testenv.ResolverProxyPort {
			t.Fatalf("with a KubeElasti resolver pod still Ready the slice port is %v (%v), want %d", got["http"].Port, err, testenv.ResolverProxyPort)
		}
	}

	// The last KubeElasti pod goes: the Service moves to its own port.
	e.Scale(elastiv1alpha1.KindDeployment, "kubeelasti", 0)
	waitDeclarations(e, map[string]bool{"elasti": true})
	waitSlicePorts(e, "web", map[string]int32{"http": ports[80]})

	// And back, should one return.
	e.Scale(elastiv1alpha1.KindDeployment, "kubeelasti", 1)
	waitSlicePorts(e, "web", map[string]int32{"http": testenv.ResolverProxyPort})
}

// (d) A range too small: the ElastiService that finds it exhausted says so
// (condition and Warning event) and is routed by Host; when another
// ElastiService goes, its ports are freed and the waiting one gets one.
func TestExhaustedPortRangeFallsBackUntilAPortIsFreed(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Opts.ResolverPortRange = portalloc.Range{First: 20000, Last: 20001}
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 1, true)

	multiPortApp(e, "two", 0)
	e.ElastiService("two", "two", elastiv1alpha1.KindDeployment, "two")
	two := e.WaitResolverPorts("two", 80, 9000)
	if got := []int32{two[80], two[9000]}; !slices.Equal(slices.Sorted(slices.Values(got)), []int32{20000, 20001}) {
		t.Errorf("two got %v, want the whole range", got)
	}

	e.Fronted("one", 0)
	var cond *metav1.Condition
	e.Eventually("one to report the range exhausted", func() (bool, string) {
		es := e.Get("one")
		cond = meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == elastiv1alpha1.ReasonResolverPortRangeExhausted &&
			len(es.Status.ResolverPorts) == 0, fmt.Sprintf("%+v, ports %v", cond, es.Status.ResolverPorts)
	})
	if !strings.Contains(cond.Message, "20000-20001") {
		t.Errorf("condition message %q does not name the range", cond.Message)
	}
	e.Eventually("a Warning event", func() (bool, string) { return e.HasEvent("one", controller.ReasonResolverPortRangeExhausted) })
	e.WaitMode("one", elastiv1alpha1.ModeProxy) // Ready stays True
	waitSlicePorts(e, "one", map[string]int32{"http": testenv.ResolverProxyPort})

	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	one := e.WaitResolverPorts("one", 80)
	if !(portalloc.Range{First: 20000, Last: 20001}).Contains(one[80]) {
		t.Errorf("one got %d", one[80])
	}
	waitSlicePorts(e, "one", map[string]int32{"http": one[80]})
}

// (b) An operator restart keeps every assigned port, and ElastiServices
// created while no operator ran get ports that collide with none. The new
// operator has one worker, and the new ones come first both by name and by
// last change (the old ones are touched after), so it syncs them first
// whichever order its informer lists in: had it not taken back the
// recorded ports before its workers started, it would hand the old ones'
// ports out to them. (Leader changes: test/e2e TestLeaderChangeKeepsResolverPorts.)
func TestResolverPortsSurviveAnOperatorRestart(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 1, true)
	old := e.Fleet("app", 6, 0)
	before := map[string]int32{}
	for _, name := range old {
		before[name] = e.WaitResolverPorts(name, 80)[80]
	}

	e.Stop()
	created := e.Fleet("aa", 4, 0)
	for _, name := range old {
		patch := []byte(`{"metadata":{"labels":{"touched":"after-the-newcomers"}}}`)
		if _, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Patch(e.Ctx(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.Opts.ElastiServiceWorkers = 1
	e.StartOperator()

	after := map[int32]string{}
	for _, name := range append(created, old...) {
		p := e.WaitResolverPorts(name, 80)[80]
		if other, dup := after[p]; dup {
			t.Errorf("%s and %s both have resolver port %d", name, other, p)
		}
		after[p] = name
	}
	for name, p := range before {
		if after[p] != name {
			t.Errorf("%s had resolver port %d before the restart; now %s has it", name, p, after[p])
		}
	}
	for _, name := range old {
		waitSlicePorts(e, name, map[string]int32{"http": before[name]})
	}
}

// (e) Port quotas: a Service with more TCP ports than the per-ElastiService
// quota, and an ElastiService that would take its namespace past the
// namespace's quota, are routed by Host with ResolverPortQuotaExceeded and
// a Warning event, while the others keep their own ports; a port freed in
// the namespace lets the waiting one in.
func TestPortQuotasFallBackToHostRouting(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	e.Opts.ResolverPortQuota = portalloc.Quota{PerOwner: 2, PerNamespace: 3}
	e.StartOperator()
	e.ResolverService()
	e.ResolverPods(testenv.ResolverName, 1, true)

	waitQuota := func(name, inMsg string) {
		e.T.Helper()
		e.Eventually(name+" to report its quota exceeded", func() (bool, string) {
			es := e.Get(name)
			cond := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionResolverPortsAssigned)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == elastiv1alpha1.ReasonResolverPortQuotaExceeded &&
				strings.Contains(cond.Message, inMsg) && len(es.Status.ResolverPorts) == 0, fmt.Sprintf("%+v, ports %v", cond, es.Status.ResolverPorts)
		})
		e.Eventually(name+": a Warning event", func() (bool, string) { return e.HasEvent(name, controller.ReasonResolverPortQuotaExceeded) })
		e.WaitMode(name, elastiv1alpha1.ModeProxy) // Ready stays True
	}

	// Three TCP ports: past the quota of 2 per ElastiService.
	e.Deployment("wide", 0, nil)
	wide := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "wide"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "alt", Port: 8080, TargetPort: intstr.FromString("http")},
				{Name: "admin", Port: 9000, TargetPort: intstr.FromString("http")},
			},
		},
	}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), wide, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.ElastiService("wide", "wide", elastiv1alpha1.KindDeployment, "wide")
	waitQuota("wide", "--resolver-ports-per-elastiservice 2")
	waitSlicePorts(e, "wide", map[string]int32{"http": testenv.ResolverProxyPort, "alt": testenv.ResolverProxyPort, "admin": testenv.ResolverProxyPort})

	// 2 + 1 ports fill the namespace's 3; a fourth waits.
	multiPortApp(e, "two", 0)
	e.ElastiService("two", "two", elastiv1alpha1.KindDeployment, "two")
	e.WaitResolverPorts("two", 80, 9000)
	e.Fronted("one", 0)
	one := e.WaitResolverPorts("one", 80)
	e.Fronted("late", 0)
	waitQuota("late", "--resolver-ports-per-namespace 3")
	waitSlicePorts(e, "late", map[string]int32{"http": testenv.ResolverProxyPort})
	waitSlicePorts(e, "one", map[string]int32{"http": one[80]})

	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(e.Ctx(), "two", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	late := e.WaitResolverPorts("late", 80)
	waitSlicePorts(e, "late", map[string]int32{"http": late[80]})
}
