package testenv

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/endpointready"
	"github.com/elasti-dev/elasti/test/localcluster"
)

// PodTemplate is an app's pod: it is pinned to the kwok node and tolerates
// its taint, so kwok runs it (its IP answers through the pod network's
// shared backends), never the process node, which cannot run its image.
func PodTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
			NodeSelector: map[string]string{localcluster.FakeNodeLabel: localcluster.FakeNodeLabelValue},
			Tolerations:  []corev1.Toleration{FakeNodeToleration},
		},
	}
}

// FakeNodeToleration lets a pod onto the kwok node.
var FakeNodeToleration = corev1.Toleration{
	Key: localcluster.FakeNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
}

// App creates a Deployment and a public Service selecting it.
func (e *Env) App(name string, replicas int32) {
	e.T.Helper()
	e.Deployment(name, replicas, nil)
	e.Service(name, name)
}

// Deployment creates a Deployment of app pods named name, with replicas;
// mutate, when set, edits it first.
func (e *Env) Deployment(name string, replicas int32, mutate func(*appsv1.Deployment)) {
	e.T.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: PodTemplate(name),
		},
	}
	if mutate != nil {
		mutate(d)
	}
	if _, err := e.Kube.AppsV1().Deployments(e.NS).Create(e.Ctx(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// Service creates a public Service selecting app (see CreateService).
func (e *Env) Service(name, app string) {
	e.T.Helper()
	if err := e.CreateService(name, app); err != nil {
		e.T.Fatal(err)
	}
}

// CreateService creates a public Service (port 80 named http, to the pods'
// http port) selecting app; unlike Service it is safe from any goroutine.
func (e *Env) CreateService(name, app string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	_, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), svc, metav1.CreateOptions{})
	return err
}

// Resolver stands in for the resolver Deployment: kwok makes its pods Ready
// with pod IPs, which is all the operator reads. Its pods do not declare
// per-port routing, as KubeElasti's resolver pods do not.
func (e *Env) Resolver(replicas int32) {
	e.T.Helper()
	e.ResolverService()
	e.ResolverPods(ResolverName, replicas, false)
}

// ResolverService creates the resolver Service as elasti's manifests do:
// the proxy port, and the per-port-routing port that only pods declaring it
// (by a container port of that name) are listed under. It selects every
// pod ResolverPods makes.
func (e *Env) ResolverService() {
	e.T.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ResolverName, Namespace: e.NS},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{ResolverPodLabel: "true"},
			Ports: []corev1.ServicePort{
				{Name: "http-proxy", Port: ResolverProxyPort},
				{Name: PerPortRoutingPortName, Port: PerPortRoutingPort, TargetPort: intstr.FromString(PerPortContainerPortName)},
			},
		},
	}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(e.Ctx(), svc, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// ResolverPods runs replicas resolver stand-in pods in a Deployment called
// name (its pods are labelled app=name), behind ResolverService. With
// perPort they declare per-port routing as elasti's resolver manifests do,
// with the container port named PerPortContainerPortName.
func (e *Env) ResolverPods(name string, replicas int32, perPort bool) {
	e.T.Helper()
	e.Deployment(name, replicas, func(d *appsv1.Deployment) {
		d.Spec.Template.Labels[ResolverPodLabel] = "true"
		if perPort {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: PerPortContainerPortName, ContainerPort: PerPortRoutingPort})
		}
	})
}

// ElastiService creates an ElastiService fronting service for the target
// of kind, with minTargetReplicas 2 and cooldownPeriod 60.
func (e *Env) ElastiService(name, service, kind, target string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	return e.ElastiServiceWith(name, service, kind, target, nil)
}

// ElastiServiceWith is ElastiService, with mutate editing it first.
func (e *Env) ElastiServiceWith(name, service, kind, target string, mutate func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	apiVersion := elastiv1alpha1.APIVersionApps
	if kind == elastiv1alpha1.KindRollout {
		apiVersion = elastiv1alpha1.APIVersionArgoV1
	}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           service,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: apiVersion, Kind: kind, Name: target},
			MinTargetReplicas: 2,
			CooldownPeriod:    60,
		},
	}
	if mutate != nil {
		mutate(es)
	}
	created, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Create(e.Ctx(), es, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return created
}

// StatefulSet creates a StatefulSet of app pods named name, with replicas.
func (e *Env) StatefulSet(name string, replicas int32) {
	e.T.Helper()
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:    PodTemplate(name),
		},
	}
	if _, err := e.Kube.AppsV1().StatefulSets(e.NS).Create(e.Ctx(), st, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// Scale sets a Deployment's or StatefulSet's replicas through its scale
// subresource, as a person or an autoscaler would.
func (e *Env) Scale(kind, name string, replicas int32) {
	e.T.Helper()
	var err error
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	switch kind {
	case elastiv1alpha1.KindDeployment:
		_, err = e.Kube.AppsV1().Deployments(e.NS).Patch(e.Ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	case elastiv1alpha1.KindStatefulSet:
		_, err = e.Kube.AppsV1().StatefulSets(e.NS).Patch(e.Ctx(), name, "application/merge-patch+json", patch, metav1.PatchOptions{}, "scale")
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// Fronted creates a Deployment with replicas, its Service and an
// ElastiService for them, all named name, and waits for the mode replicas
// implies: proxy at zero, serve otherwise. A serving one is put under an
// ElastiService only once the cluster lists a pod of it, as when elasti is
// added to a running app: otherwise its first sync could find no endpoint,
// switch to proxy, and make the private Service a serving one never needs.
func (e *Env) Fronted(name string, replicas int32) {
	e.T.Helper()
	e.App(name, replicas)
	if replicas > 0 {
		e.Eventually("a serving endpoint of "+name, func() (bool, string) {
			for _, s := range e.SlicesFor(name) {
				if slices.ContainsFunc(s.Endpoints, endpointready.Serving) {
					return true, ""
				}
			}
			return false, "none listed"
		})
	}
	e.ElastiService(name, name, elastiv1alpha1.KindDeployment, name)
	if replicas == 0 {
		e.WaitMode(name, elastiv1alpha1.ModeProxy)
		// Created right after the switch, by a queue of its own.
		e.Eventually("the private Service of "+name, func() (bool, string) {
			_, err := e.PrivateService(name)
			return err == nil, fmt.Sprint(err)
		})
	} else {
		e.WaitMode(name, elastiv1alpha1.ModeServe)
	}
}

// FrontedAfterProxy is Fronted for a target that serves with replicas
// after a spell in proxy mode, as a woken one does: the operator has made
// its private Service, and it waits until all replicas are ready.
func (e *Env) FrontedAfterProxy(name string, replicas int32) {
	e.T.Helper()
	e.Fronted(name, 0)
	e.Scale(elastiv1alpha1.KindDeployment, name, replicas)
	e.WaitMode(name, elastiv1alpha1.ModeServe)
	e.Eventually(fmt.Sprintf("%d ready pods of %s", replicas, name), func() (bool, string) {
		ips := e.ReadyPodIPs(name)
		return len(ips) == int(replicas), fmt.Sprint(ips)
	})
}

// Fleet creates n Deployments with replicas, each with its Service and an
// ElastiService, named prefix-0 … prefix-(n-1), and returns the names.
func (e *Env) Fleet(prefix string, n int, replicas int32) []string {
	e.T.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		e.App(names[i], replicas)
		e.ElastiService(names[i], names[i], elastiv1alpha1.KindDeployment, names[i])
	}
	return names
}
