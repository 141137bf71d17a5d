package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	crdName = "elastiservices.elasti.truefoundry.com"
	// upgradeTag is the image tag helm upgrade moves both Deployments to,
	// and the release the binary behind it is built as.
	upgradeTag  = "v0.1.0-upgrade"
	wakeTimeout = 60 * time.Second
	// handScaleDownBound is how long a Service may be dark after the test
	// scales its target to zero by hand, until the operator puts the
	// resolver in front (test/e2e/traffic has the same allowance).
	handScaleDownBound = 3 * time.Second
	// loadRounds bounds the client's requests during the upgrade: rounds of
	// loadRepeat+1 requests each, until the upgrade is done.
	loadRounds = 400
	loadRepeat = 9
)

// TestHelmInstallWakeUpgradeUninstall installs elasti with helm install,
// from the chart pushed to a loopback OCI registry, and a KubeElasti
// values file, unchanged; wakes a Service through the real
// traffic path; upgrades to another build (another image tag, run by a
// binary built as another release) while a client sends requests to an
// awake Service and a request to a sleeping one, whose pod cannot start
// until the resolver has rolled out, is held by an old resolver pod across
// the rollout and answered by the Service's pod; checks every elasti pod
// then runs the new release; then runs a plain helm uninstall, with one Service
// asleep and one awake and a client calling both: the pre-delete hook
// hands both back to their pods, every request is answered, and nothing
// but the CRD and the ElastiServices, without elasti's finalizer (and the
// namespace and the operator's Lease), is left. The dark-Service watcher
// runs throughout.
func TestHelmInstallWakeUpgradeUninstall(t *testing.T) {
	b := startBed(t)
	// The bed is honest before anything runs on it: no kwok pod is Ready
	// before its address answers (clustertest.ReadyAfterAddress).
	ctx := t.Context()
	cfg := b.cluster.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	e2ebed.CheckPodsAnswerWhenReady(t, b.Net, kube, 30)
	crds := apiextensionsclient.NewForConfigOrDie(cfg)
	values := b.root + "/charts/elasti/ci/kubeelasti-values.yaml"

	// What the KubeElasti values file expects to find: the Secret its
	// Sentry setting names (an empty DSN: no reports leave the bed), and the
	// ServiceMonitor CRD of the Prometheus Operator, as a stand-in.
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "elasti-secret", Namespace: namespace}, StringData: map[string]string{"operatorSentryDsn": ""}}
	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := install.ApplyCRDs(ctx, cfg, serviceMonitorCRD()); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the ElastiService CRD before helm install: %v; want none, so helm installs it from crds/", err)
	}

	chart, chartVersion := b.publishChart(t)
	t.Logf("helm install %s --version %s with the KubeElasti values file", chart, chartVersion)
	b.runHelm(t, 5*time.Minute, "install", release, chart, "--version", chartVersion, "--plain-http", "--namespace", namespace, "--create-namespace", "-f", values)
	for _, d := range []string{"elasti-operator-controller-manager", "elasti-resolver"} {
		if err := b.WaitDeploymentReady(ctx, namespace, d, readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("helm install did not create the CRD from crds/: %v", err)
	}
	if crd.Annotations["meta.helm.sh/release-name"] != "" {
		t.Errorf("the CRD belongs to the release (%v); crds/ must leave it unowned", crd.Annotations)
	}

	e := testenv.New(t)
	for _, app := range []string{"web", "sleepy"} {
		e.App(app, 1)
		e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.MinTargetReplicas = 1
		})
		e.WaitMode(app, elastiv1alpha1.ModeServe)
	}
	client, err := b.Client(ctx, e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	loadClient, err := b.Client(ctx, e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(loadClient.Close)
	do := func(c *realnet.Client, req realnet.Request) realnet.Response {
		t.Helper()
		resp, err := c.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, app := range []string{"web", "sleepy"} {
		e.Eventually("kube-proxy to route "+app, func() (bool, string) {
			resp := do(client, realnet.Request{URL: "http://" + app + "/", Timeout: 2 * time.Second})
			return resp.Status == 200, resp.String()
		})
	}
	dark := e.WatchDark("web", "sleepy")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("elasti's pods:\n%s", b.Node.Logs(namespace, "", 30))
		}
	})

	sleep := func(app string) {
		t.Helper()
		dark.Tolerate(handScaleDownBound)
		e.Scale(elastiv1alpha1.KindDeployment, app, 0)
		e.WaitMode(app, elastiv1alpha1.ModeProxy)
		e.Eventually(app+"'s pods to be gone", func() (bool, string) {
			ips := e.ReadyPodIPs(app)
			return len(ips) == 0, fmt.Sprint(ips)
		})
		if err := b.WaitKubeProxyFollows(ctx, e.NS, app, testenv.WaitTimeout); err != nil {
			t.Fatal(err)
		}
	}
	woken := func(app string, resp realnet.Response) {
		t.Helper()
		var reply echoReply
		if resp.Status != 200 || json.Unmarshal([]byte(resp.Body), &reply) != nil {
			t.Fatalf("%s: want the app's 200, got %s", app, resp)
		}
		if ips := e.ReadyPodIPs(app); !slices.Contains(ips, reply.ServedBy) {
			t.Fatalf("%s answered by %s, not a Ready pod (Ready: %v)", app, reply.ServedBy, ips)
		}
		e.WaitMode(app, elastiv1alpha1.ModeServe)
		t.Logf("%s woken in %s", app, resp.Duration.Round(time.Millisecond))
	}

	t.Log("a wake on the real traffic path: DNS, kube-proxy, the chart's resolver and operator")
	sleep("web")
	woken("web", do(client, realnet.Request{URL: "http://web/installed", Timeout: wakeTimeout}))

	t.Log("helm upgrade to another build, " + upgradeTag + ", while a client calls web and a request to sleepy is held across the resolver's rollout")
	b.wantVersions(t, kube, b.appVersion(t))
	sleep("sleepy")
	// sleepy's pods cannot start until the rollout is over, so the request
	// stays held at the old resolver pod while the new ones roll out.
	setUnschedulable(t, e, "sleepy", true)
	upgradeLoad := startLoad(ctx, loadClient, "http://web/load")
	heldResp := make(chan realnet.Response, 1)
	go func() {
		resp, err := client.Do(ctx, realnet.Request{URL: "http://sleepy/held-across-the-upgrade", Timeout: 3 * time.Minute})
		if err != nil {
			resp.Err = err.Error()
		}
		heldResp <- resp
	}()
	e.Eventually("the request to sleepy to be held: the operator scaled sleepy up for it", func() (bool, string) {
		r := e.Replicas(elastiv1alpha1.KindDeployment, "sleepy")
		return r >= 1, fmt.Sprint("replicas ", r)
	})
	oldResolvers := podNames(t, kube, "app=elasti-resolver")
	upgradeErr := make(chan error, 1)
	go func() {
		_, err := b.tryHelm(10*time.Minute, "upgrade", release, chart, "--version", chartVersion, "--plain-http", "--namespace", namespace, "-f", values,
			"--set", "elastiController.manager.image.repository=elasti-dev/elasti-operator",
			"--set", "elastiController.manager.image.tag="+upgradeTag,
			"--set", "elastiResolver.proxy.image.repository=elasti-dev/elasti-resolver",
			"--set", "elastiResolver.proxy.image.tag="+upgradeTag,
			"--wait", "--timeout", "8m")
		upgradeErr <- err
	}()
	e.EventuallyWithin("the resolver's rollout: every old pod ("+strings.Join(oldResolvers, ", ")+") terminating or gone, the new ones Ready", readyTimeout, func() (bool, string) {
		select {
		case r := <-heldResp:
			t.Fatalf("the held request was answered before the rollout was over, so it spans nothing: %s", r)
		default:
		}
		return resolverRolledOut(t, kube, oldResolvers)
	})
	t.Log("the resolver has rolled out; sleepy may start now")
	setUnschedulable(t, e, "sleepy", false)
	held := <-heldResp
	if err := <-upgradeErr; err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"elasti-operator-controller-manager", "elasti-resolver"} {
		if err := b.WaitDeploymentReady(ctx, namespace, d, readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	woken("sleepy", held)
	if held.Header.Get(resolver.DefaultColdStartHeader) == "" {
		t.Errorf("the request to sleepy was answered without %s, so not held by a resolver: %s", resolver.DefaultColdStartHeader, held)
	}
	upgradeLoad.stop(t, "the upgrade")
	b.wantVersions(t, kube, upgradeTag)

	t.Log("a wake through the upgraded release")
	sleep("web")
	woken("web", do(client, realnet.Request{URL: "http://web/upgraded", Timeout: wakeTimeout}))

	t.Log("plain helm uninstall, sleepy asleep and web awake, while a client calls both")
	sleep("sleepy")
	uninstallErr := make(chan error, 1)
	go func() {
		_, err := b.tryHelm(6*time.Minute, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "5m")
		uninstallErr <- err
	}()
	webLoad := startLoad(ctx, loadClient, "http://web/uninstalling")
	// Requests to sleepy only once the hook has stopped the operator, so
	// that no wake by the operator, only the hook, brings sleepy back.
	e.Eventually("the uninstall hook to stop the operator", func() (bool, string) {
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, "elasti-operator-controller-manager", metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err), err.Error()
		}
		return ptr.Deref(d.Spec.Replicas, 1) == 0, fmt.Sprint("replicas ", ptr.Deref(d.Spec.Replicas, 1))
	})
	t.Logf("the hook stopped the operator; sleepy has %d replicas", e.Replicas(elastiv1alpha1.KindDeployment, "sleepy"))
	sleepyLoad := startLoad(ctx, client, "http://sleepy/uninstalling")
	if err := <-uninstallErr; err != nil {
		t.Error(err)
	}
	webLoad.stop(t, "helm uninstall (web, awake)")
	sleepyLoad.stop(t, "helm uninstall (sleepy, asleep)")
	e.Eventually("elasti's pods to be gone", func() (bool, string) {
		pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(len(pods.Items), err)
	})
	for _, app := range []string{"web", "sleepy"} {
		answeredByPod(t, e, app, do(client, realnet.Request{URL: "http://" + app + "/uninstalled", Timeout: 10 * time.Second}))
		if got := e.Replicas(elastiv1alpha1.KindDeployment, app); got < 1 {
			t.Errorf("%s has %d replicas after helm uninstall; want it scaled back up", app, got)
		}
		// The ElastiService is the user's: it stays, and nothing keeps it
		// from being deleted once no operator runs.
		es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(ctx, app, metav1.GetOptions{})
		switch {
		case err != nil:
			t.Errorf("%s's ElastiService after helm uninstall: %v; want it kept", app, err)
		case slices.Contains(es.Finalizers, elastiv1alpha1.Finalizer):
			t.Errorf("%s's ElastiService keeps elasti's finalizer %v after helm uninstall", app, es.Finalizers)
		}
	}
	if left := leftovers(t, kube, e.NS); len(left) > 0 {
		t.Errorf("helm uninstall left behind:\n  %s", strings.Join(left, "\n  "))
	}
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("the CRD after helm uninstall: %v; Helm's CRD policy keeps it", err)
	}
}

// setUnschedulable keeps app's new pods from being scheduled (a node
// selector no node matches), or lets them be again.
func setUnschedulable(t *testing.T, e *testenv.Env, app string, on bool) {
	t.Helper()
	deployments := e.Kube.AppsV1().Deployments(e.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(t.Context(), app, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if on {
			d.Spec.Template.Spec.NodeSelector = map[string]string{unschedulableLabel: "true"}
		} else {
			delete(d.Spec.Template.Spec.NodeSelector, unschedulableLabel)
		}
		_, err = deployments.Update(t.Context(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// unschedulableLabel is a node label no node has.
const unschedulableLabel = "elasti.test/unschedulable"

// podNames lists the names of elasti's pods that selector selects and
// that are not terminating.
func podNames(t *testing.T, kube kubernetes.Interface, selector string) []string {
	t.Helper()
	pods, err := kube.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// resolverRolledOut reports whether the resolver Deployment has rolled
// out, every pod of old terminating or gone.
func resolverRolledOut(t *testing.T, kube kubernetes.Interface, old []string) (bool, string) {
	t.Helper()
	d, err := kube.AppsV1().Deployments(namespace).Get(t.Context(), "elasti-resolver", metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.ReadyReplicas < want {
		return false, fmt.Sprintf("generation %d observed %d, %d updated and %d ready of %d", d.Generation, st.ObservedGeneration, st.UpdatedReplicas, st.ReadyReplicas, want)
	}
	live := podNames(t, kube, "app=elasti-resolver")
	for _, o := range old {
		if slices.Contains(live, o) {
			return false, "old resolver pod " + o + " still serves"
		}
	}
	return true, ""
}

// wantVersions fails the test unless every running elasti pod started the
// build of version.
func (b *bed) wantVersions(t *testing.T, kube kubernetes.Interface, version string) {
	t.Helper()
	pods, err := kube.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		c := p.Spec.Containers[0].Name
		if got := b.startedVersion(namespace, p.Name, c); got != version {
			t.Errorf("pod %s (%s) runs version %q; want %q", p.Name, p.Spec.Containers[0].Image, got, version)
		}
		seen++
	}
	if seen == 0 {
		t.Errorf("no running elasti pod to check for version %s", version)
	}
	t.Logf("%d elasti pods run version %s", seen, version)
}

// answeredByPod fails the test unless resp is app's 200 from one of its
// Ready pods.
func answeredByPod(t *testing.T, e *testenv.Env, app string, resp realnet.Response) {
	t.Helper()
	var reply echoReply
	if resp.Status != 200 || json.Unmarshal([]byte(resp.Body), &reply) != nil {
		t.Errorf("%s: want its pod's 200, got %s", app, resp)
		return
	}
	if ips := e.ReadyPodIPs(app); !slices.Contains(ips, reply.ServedBy) {
		t.Errorf("%s answered by %s, not a Ready pod (Ready: %v)", app, reply.ServedBy, ips)
	}
}

// load is a client calling Services in a loop, bounded by loadRounds.
type load struct {
	sent, failed atomic.Int64
	firstFailure atomic.Value
	quit         chan struct{}
	done         sync.WaitGroup
}

// startLoad calls each URL in turn, loadRepeat+1 requests a round, until
// stop or loadRounds rounds.
func startLoad(ctx context.Context, c *realnet.Client, urls ...string) *load {
	l := &load{quit: make(chan struct{})}
	l.done.Go(func() {
		for i := 0; i < loadRounds; i++ {
			select {
			case <-l.quit:
				return
			default:
			}
			url := fmt.Sprintf("%s/%d", urls[i%len(urls)], i)
			// Long enough for a request held while a target starts.
			resp, err := c.Do(ctx, realnet.Request{URL: url, Timeout: 30 * time.Second, Repeat: loadRepeat})
			switch {
			case err != nil:
				l.failed.Add(1)
				l.firstFailure.CompareAndSwap(nil, err.Error())
			case resp.Err != "" || resp.Status != 200:
				l.sent.Add(int64(len(resp.Repeats)) + 1)
				l.failed.Add(1)
				l.firstFailure.CompareAndSwap(nil, url+": "+resp.String())
			default:
				l.sent.Add(int64(len(resp.Repeats)) + 1)
			}
		}
	})
	return l
}

// stop ends the load and fails the test if any request failed during what,
// or if none was sent.
func (l *load) stop(t *testing.T, what string) {
	t.Helper()
	close(l.quit)
	l.done.Wait()
	t.Logf("during %s: %d requests, %d failed", what, l.sent.Load(), l.failed.Load())
	if l.failed.Load() > 0 {
		t.Errorf("%d requests failed during %s; the first: %v", l.failed.Load(), what, l.firstFailure.Load())
	}
	if l.sent.Load() == 0 {
		t.Errorf("no request was answered during %s", what)
	}
}

// leftovers lists what elasti could have left: anything in its namespace
// but the Secret the test made and the operator's leader-election Lease
// (which the operator, not the chart, creates), elasti's cluster-wide RBAC,
// and elasti's generated objects in the app namespace.
func leftovers(t *testing.T, kube kubernetes.Interface, appNS string) []string {
	t.Helper()
	ctx := t.Context()
	var left []string
	add := func(kind string, names []string, err error) {
		if err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		for _, n := range names {
			left = append(left, kind+" "+n)
		}
	}
	lo := metav1.ListOptions{}
	if l, err := kube.AppsV1().Deployments(namespace).List(ctx, lo); err == nil {
		add("Deployment", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("Deployment", nil, err)
	}
	if l, err := kube.CoreV1().Services(namespace).List(ctx, lo); err == nil {
		add("Service", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("Service", nil, err)
	}
	if l, err := kube.CoreV1().ServiceAccounts(namespace).List(ctx, lo); err == nil {
		add("ServiceAccount", names(l.Items, func(o metav1.Object) bool { return o.GetName() != "default" }), nil)
	} else {
		add("ServiceAccount", nil, err)
	}
	if l, err := kube.CoreV1().ConfigMaps(namespace).List(ctx, lo); err == nil {
		add("ConfigMap", names(l.Items, func(o metav1.Object) bool { return o.GetName() != "kube-root-ca.crt" }), nil)
	} else {
		add("ConfigMap", nil, err)
	}
	if l, err := kube.CoreV1().Secrets(namespace).List(ctx, lo); err == nil {
		add("Secret", names(l.Items, func(o metav1.Object) bool { return o.GetName() != "elasti-secret" }), nil)
	} else {
		add("Secret", nil, err)
	}
	if l, err := kube.RbacV1().Roles(namespace).List(ctx, lo); err == nil {
		add("Role", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("Role", nil, err)
	}
	if l, err := kube.RbacV1().RoleBindings(namespace).List(ctx, lo); err == nil {
		add("RoleBinding", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("RoleBinding", nil, err)
	}
	if l, err := kube.NetworkingV1().NetworkPolicies(namespace).List(ctx, lo); err == nil {
		add("NetworkPolicy", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("NetworkPolicy", nil, err)
	}
	if l, err := kube.AutoscalingV2().HorizontalPodAutoscalers(namespace).List(ctx, lo); err == nil {
		add("HorizontalPodAutoscaler", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("HorizontalPodAutoscaler", nil, err)
	}
	if l, err := kube.BatchV1().Jobs(namespace).List(ctx, lo); err == nil {
		add("Job", names(l.Items, func(o metav1.Object) bool { return true }), nil)
	} else {
		add("Job", nil, err)
	}
	if l, err := kube.CoordinationV1().Leases(namespace).List(ctx, lo); err == nil {
		add("Lease", names(l.Items, func(o metav1.Object) bool { return o.GetName() != "elasti-operator-leader" }), nil)
	} else {
		add("Lease", nil, err)
	}
	elasti := func(o metav1.Object) bool { return strings.HasPrefix(o.GetName(), "elasti-") }
	if l, err := kube.RbacV1().ClusterRoles().List(ctx, lo); err == nil {
		add("ClusterRole", names(l.Items, elasti), nil)
	} else {
		add("ClusterRole", nil, err)
	}
	if l, err := kube.RbacV1().ClusterRoleBindings().List(ctx, lo); err == nil {
		add("ClusterRoleBinding", names(l.Items, elasti), nil)
	} else {
		add("ClusterRoleBinding", nil, err)
	}
	if l, err := kube.CoreV1().Services(appNS).List(ctx, lo); err == nil {
		add("Service", names(l.Items, elasti), nil)
	} else {
		add("Service", nil, err)
	}
	if l, err := kube.DiscoveryV1().EndpointSlices(appNS).List(ctx, lo); err == nil {
		add("EndpointSlice", names(l.Items, elasti), nil)
	} else {
		add("EndpointSlice", nil, err)
	}
	return left
}

// names returns the namespace/name of the items keep selects.
func names[T any, P interface {
	*T
	metav1.Object
}](items []T, keep func(metav1.Object) bool) []string {
	var out []string
	for i := range items {
		o := P(&items[i])
		if keep(o) {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
	}
	return out
}

// serviceMonitorCRD stands in for the Prometheus Operator's CRD, which the
// KubeElasti values file's enableMonitoring needs: the apiserver stores
// ServiceMonitors, and nothing reads them here.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: "ServiceMonitor", ListKind: "ServiceMonitorList", Plural: "servicemonitors", Singular: "servicemonitor",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}
