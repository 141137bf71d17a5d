package traffic

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The Services of the switch, and where KubeElasti left each.
var kubeElastiServices = map[string]testenv.KubeElastiState{
	"asleep-a":    testenv.KubeElastiAsleep,
	"asleep-b":    testenv.KubeElastiAsleep,
	"awake-slept": testenv.KubeElastiServing,
	"awake":       testenv.KubeElastiNeverSlept,
}

// elastiResolverPods selects elasti's resolver pods and not KubeElasti's,
// which carry app=elasti-resolver too.
const elastiResolverPods = "app=elasti-resolver,app.kubernetes.io/name!=elasti"

// endpointSliceController is the managed-by value of the slices the
// EndpointSlice controller keeps for every Service.
const endpointSliceController = "endpointslice-controller.k8s.io"

// TestSwitchFromKubeElastiInPlace: a cluster as KubeElasti v0.1.30 left it
// (two Services asleep behind its resolver slices, one serving that slept
// before, one that never slept; its operator and resolver running) is
// switched to elasti by the runbook in docs/install/from-kubeelasti.md, its kubectl commands as they
// are written there (kubeElastiSwitch): Helm's release record, KubeElasti's
// operator Deployment and its Services are deleted, its resolver
// Deployment is deleted with its pods orphaned, and `kubectl apply -f
// manifests/` installs elasti. Throughout, no Service goes dark. Then KubeElasti's objects are
// adopted, not doubled: one resolver slice per sleeping Service, now
// elasti's and listing only elasti's resolver pods (its Deployment rolled
// KubeElasti's orphaned resolver pods away), one private Service per
// Service that had one, one finalizer. The serving Services answer, a
// sleeping one wakes through elasti on a request, and deleting another's
// ElastiService scales its target back up and removes what KubeElasti made.
func TestSwitchFromKubeElastiInPlace(t *testing.T) {
	b := testBed(t)
	e := testenv.New(t)
	ctx := t.Context()

	// The bed runs elasti; take its control plane away (the CRD stays, as
	// KubeElasti's does), and put KubeElasti's in its place.
	removeElastiControlPlane(t, b)
	// Whatever happens below, later tests find elasti installed.
	t.Cleanup(func() { reinstallElasti(t, b) })
	if err := testenv.KubeElastiControlPlane(ctx, b.Kube, elastiNamespace); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitDeploymentReady(ctx, elastiNamespace, testenv.KubeElastiResolverDeployment, readyTimeout); err != nil {
		t.Fatal(err)
	}
	kubeElastiResolverIPs := podIPs(t, b, "app.kubernetes.io/name=elasti,app=elasti-resolver")
	if len(kubeElastiResolverIPs) == 0 {
		t.Fatal("KubeElasti's resolver has no Ready pod")
	}
	var all, asleep []string
	for svc, state := range kubeElastiServices {
		e.KubeElastiService(svc, state, kubeElastiResolverIPs)
		all = append(all, svc)
		if state == testenv.KubeElastiAsleep {
			asleep = append(asleep, svc)
		}
	}
	sort.Strings(all)
	sort.Strings(asleep)
	client, err := b.Client(ctx, e.NS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	do := func(req realnet.Request) realnet.Response {
		t.Helper()
		resp, err := client.Do(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for svc, state := range kubeElastiServices {
		if state != testenv.KubeElastiAsleep {
			e.Eventually("kube-proxy to route "+svc+" to its pod", func() (bool, string) {
				resp := do(realnet.Request{URL: "http://" + svc + "/", Timeout: 2 * time.Second})
				return resp.Status == 200, resp.String()
			})
		}
	}
	dark := e.WatchDark(all...)
	t.Logf("KubeElasti's state laid down: asleep %v behind its resolver %v", asleep, kubeElastiResolverIPs)

	// The switch, as the runbook says.
	began := time.Now()
	runbook(t, b, kubeElastiSwitch)
	for _, d := range []string{operatorDeployment, resolverDeployment} {
		if err := b.WaitDeploymentReady(ctx, elastiNamespace, d, readyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: elasti is Ready in KubeElasti's place", time.Since(began).Round(time.Millisecond))

	// KubeElasti's resolver pods, orphaned, were adopted and rolled away
	// by elasti's Deployment, which selects them too.
	e.Eventually("KubeElasti's resolver pods to be gone", func() (bool, string) {
		ips := podIPs(t, b, "app.kubernetes.io/name=elasti")
		return len(ips) == 0, fmt.Sprint(ips)
	})
	ours := podIPs(t, b, elastiResolverPods)
	if out, err := b.cluster.Kubectl(ctx, "-n", elastiNamespace, "get", "secrets", "-l", "owner=helm", "-o", "name"); err != nil || strings.Contains(string(out), "secret/") {
		t.Errorf("Helm's record of KubeElasti's release is still there (%v): %s", err, out)
	}

	// Adopted, never duplicated.
	for _, svc := range asleep {
		e.Eventually(svc+"'s resolver slice to be elasti's, on elasti's resolver", func() (bool, string) {
			// The EndpointSlice controller keeps the Service's own
			// (empty) slice; any other is a resolver slice.
			var got []discoveryv1.EndpointSlice
			for _, s := range e.SlicesFor(svc) {
				if s.Labels[discoveryv1.LabelManagedBy] != endpointSliceController {
					got = append(got, s)
				}
			}
			if len(got) != 1 {
				return false, fmt.Sprintf("%d resolver slices for %s: %v", len(got), svc, sliceNames(got))
			}
			s := got[0]
			ref := metav1.GetControllerOf(&s)
			ok := s.Name == names.ResolverSlice(svc) &&
				s.Labels[discoveryv1.LabelManagedBy] == controller.ManagedByValue &&
				ref != nil && ref.Kind == "ElastiService" && ref.Name == svc &&
				slices.Equal(testenv.SliceIPs(s), ours)
			return ok, fmt.Sprintf("%s labels %v controller %v endpoints %v, elasti's resolver %v", s.Name, s.Labels, ref, testenv.SliceIPs(s), ours)
		})
	}
	for svc, state := range kubeElastiServices {
		e.Eventually(svc+"'s ElastiService to be elasti's", func() (bool, string) {
			es := e.Get(svc)
			want := elastiv1alpha1.ModeServe
			if state == testenv.KubeElastiAsleep {
				want = elastiv1alpha1.ModeProxy
			}
			ready := false
			for _, c := range es.Status.Conditions {
				ready = ready || (c.Type == "Ready" && c.Status == metav1.ConditionTrue)
			}
			return es.Status.Mode == want && ready && slices.Equal(es.Finalizers, []string{elastiv1alpha1.Finalizer}),
				testenv.Describe(es)
		})
	}
	// KubeElasti's private Services already name the ElastiService as
	// their controller; elasti keeps that reference, adds none, and marks
	// them as its own.
	e.Eventually("one private Service per Service that had one, each adopted", func() (bool, string) {
		list, err := e.Kube.CoreV1().Services(e.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var got, want []string
		adopted := true
		for _, s := range list.Items {
			if names.IsPrivateService(s.Name) {
				got = append(got, s.Name)
				ref := metav1.GetControllerOf(&s)
				adopted = adopted && len(s.OwnerReferences) == 1 && ref != nil && ref.Kind == "ElastiService" &&
					s.Labels[controller.LabelManagedBy] == controller.AgentName && s.Spec.Type == corev1.ServiceTypeClusterIP
			}
		}
		for svc, state := range kubeElastiServices {
			if state != testenv.KubeElastiNeverSlept {
				want = append(want, names.PrivateService(svc))
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		return slices.Equal(got, want) && adopted, fmt.Sprintf("private Services %v, want %v, all adopted %v", got, want, adopted)
	})

	// KubeElasti's remaining objects go; elasti's stay untouched (the
	// wake below goes through them).
	runbook(t, b, kubeElastiCleanup)

	// The serving Services still answer from their pods.
	for svc, state := range kubeElastiServices {
		if state != testenv.KubeElastiAsleep {
			if resp := do(realnet.Request{URL: "http://" + svc + "/", Timeout: quickTimeout}); resp.Status != 200 {
				t.Errorf("%s after the switch: %s", svc, resp)
			}
		}
	}

	// A sleeping Service wakes through elasti.
	wake := asleep[0]
	if err := b.WaitKubeProxyFollows(ctx, e.NS, wake, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	resp := do(realnet.Request{URL: "http://" + wake + "/after-the-switch", Timeout: wakeTimeout})
	var reply echoReply
	if resp.Status != 200 || json.Unmarshal([]byte(resp.Body), &reply) != nil {
		t.Fatalf("%s after the switch: want the app's 200, got %s", wake, resp)
	}
	if resp.Header.Get(resolver.DefaultColdStartHeader) == "" {
		t.Errorf("%s answered without %s: not held by elasti's resolver: %s", wake, resolver.DefaultColdStartHeader, resp)
	}
	if ips := e.ReadyPodIPs(wake); !slices.Contains(ips, reply.ServedBy) {
		t.Errorf("%s answered by %s, not one of its Ready pods %v", wake, reply.ServedBy, ips)
	}
	e.WaitMode(wake, elastiv1alpha1.ModeServe)
	t.Logf("%s woke through elasti in %s", wake, resp.Duration.Round(time.Millisecond))

	// Deleting an ElastiService elasti adopted restores its target and
	// removes what KubeElasti made for it.
	gone := asleep[1]
	if err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Delete(ctx, gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(gone+"'s ElastiService to be finalized and its target restored", func() (bool, string) {
		_, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(ctx, gone, metav1.GetOptions{})
		_, pvtErr := e.Kube.CoreV1().Services(e.NS).Get(ctx, names.PrivateService(gone), metav1.GetOptions{})
		replicas := e.Replicas(elastiv1alpha1.KindDeployment, gone)
		resolverSlice := false
		for _, s := range e.SlicesFor(gone) {
			resolverSlice = resolverSlice || s.Name == names.ResolverSlice(gone)
		}
		return apierrors.IsNotFound(err) && apierrors.IsNotFound(pvtErr) && replicas == 1 && !resolverSlice,
			fmt.Sprintf("ElastiService: %v; private Service: %v; replicas %d; resolver slice %v", err, pvtErr, replicas, resolverSlice)
	})
	if err := b.WaitKubeProxyFollows(ctx, e.NS, gone, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	if resp := do(realnet.Request{URL: "http://" + gone + "/", Timeout: quickTimeout}); resp.Status != 200 || resp.Header.Get(resolver.DefaultColdStartHeader) != "" {
		t.Errorf("%s without its ElastiService: want its pod's own 200, got %s", gone, resp)
	}
	if samples, darkServices := dark.Stats(); samples == 0 || darkServices > 0 {
		t.Errorf("dark-Service watcher: %d samples, %d Services dark", samples, darkServices)
	}
}

// kubeElastiSwitch is the switch in docs/install/from-kubeelasti.md,
// steps 2 to 6, as kubectl arguments ("manifests/" is this tree's).
var kubeElastiSwitch = [][]string{
	{"-n", "elasti", "delete", "secret", "-l", "owner=helm,name=elasti"},
	{"-n", "elasti", "delete", "deployment", "elasti-operator-controller-manager"},
	{"-n", "elasti", "delete", "deployment", "elasti-resolver", "--cascade=orphan"},
	{"-n", "elasti", "delete", "service,hpa", "-l", "app.kubernetes.io/managed-by=Helm,app.kubernetes.io/instance=elasti"},
	{"apply", "-f", "manifests/"},
}

// kubeElastiCleanup is the runbook's step 8: KubeElasti's RBAC.
var kubeElastiCleanup = [][]string{
	{"-n", "elasti", "delete", "serviceaccount", "elasti-operator-controller-manager", "--ignore-not-found"},
	{"-n", "elasti", "delete", "role,rolebinding", "-l", "app.kubernetes.io/instance=elasti"},
	{"delete", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/instance=elasti"},
}

// runbook runs kubectl with each of steps in turn.
func runbook(t *testing.T, b *bed, steps [][]string) {
	t.Helper()
	for _, step := range steps {
		args := slices.Clone(step)
		for i, a := range args {
			if a == "manifests/" {
				args[i] = filepath.Join(b.root, "manifests")
			}
		}
		out, err := b.cluster.Kubectl(t.Context(), args...)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", step, err, out)
		}
		t.Logf("kubectl %v:\n%s", step, out)
	}
}

// removeElastiControlPlane deletes the bed's elasti operator and resolver
// and the Services whose names KubeElasti's chart uses too, and waits for
// them and their pods to go.
func removeElastiControlPlane(t *testing.T, b *bed) {
	t.Helper()
	ctx := t.Context()
	for _, d := range []string{operatorDeployment, resolverDeployment} {
		if err := b.Kube.AppsV1().Deployments(elastiNamespace).Delete(ctx, d, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{testenv.KubeElastiResolverService, testenv.KubeElastiOperatorService, testenv.KubeElastiMetricsService} {
		if err := b.Kube.CoreV1().Services(elastiNamespace).Delete(ctx, s, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		// Foreground: each Deployment goes only after its pods.
		deploys, err := b.Kube.AppsV1().Deployments(elastiNamespace).List(ctx, metav1.ListOptions{})
		if err == nil && len(deploys.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("elasti's deployments still there after %s: %v", readyTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reinstallElasti leaves the bed as startBed made it: KubeElasti's
// leftovers gone and elasti applied from manifests/ and Ready.
func reinstallElasti(t *testing.T, b *bed) {
	ctx := context.Background()
	for _, d := range []string{testenv.KubeElastiOperatorDeployment, testenv.KubeElastiResolverDeployment} {
		if d, err := b.Kube.AppsV1().Deployments(elastiNamespace).Get(ctx, d, metav1.GetOptions{}); err == nil && d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] == "elasti" {
			_ = b.Kube.AppsV1().Deployments(elastiNamespace).Delete(ctx, d.Name, metav1.DeleteOptions{})
		}
	}
	for _, s := range []string{testenv.KubeElastiResolverService, testenv.KubeElastiOperatorService, testenv.KubeElastiMetricsService} {
		if s, err := b.Kube.CoreV1().Services(elastiNamespace).Get(ctx, s, metav1.GetOptions{}); err == nil && s.Spec.Selector["app.kubernetes.io/name"] == "elasti" {
			_ = b.Kube.CoreV1().Services(elastiNamespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	}
	if err := b.installElasti(ctx); err != nil {
		t.Errorf("reinstalling elasti: %v", err)
	}
}

// podIPs lists the IPs of the Ready, not terminating, pods in elasti's
// namespace that selector selects, sorted.
func podIPs(t *testing.T, b *bed, selector string) []string {
	t.Helper()
	pods, err := b.Kube.CoreV1().Pods(elastiNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" && testenv.PodReady(&p) {
			ips = append(ips, p.Status.PodIP)
		}
	}
	sort.Strings(ips)
	return ips
}

func sliceNames(list []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}
