package testenv

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
	"github.com/elasti-dev/elasti/test/localcluster"
)

// What KubeElasti v0.1.30 leaves in a cluster, object for object, so a
// test can switch from it to elasti in place. The facts come from its
// source (operator/internal/controller, pkg/utils, charts/elasti) and are
// restated here; nothing of it is copied.
//
// Its Helm chart, installed as release "elasti" into namespace "elasti"
// (the names its docs use), renders the control plane below. Its
// Deployments' and Services' names are the ones elasti's manifests use, so
// `kubectl apply` of elasti meets them: the selectors differ, and a
// Deployment's selector is immutable.
const (
	KubeElastiOperatorDeployment = "elasti-operator-controller-manager"
	KubeElastiResolverDeployment = "elasti-resolver"
	KubeElastiResolverService    = "elasti-resolver-service"
	KubeElastiOperatorService    = "elasti-operator-controller-service"
	KubeElastiMetricsService     = "elasti-operator-controller-manager-metrics-service"
	// KubeElastiProxyPort is the resolver's reverse-proxy port, the one
	// port of every resolver slice KubeElasti writes.
	KubeElastiProxyPort = 8012
	// kubeElastiInternalPort is the resolver's and the operator's other
	// port (the operator's is the scale endpoint).
	kubeElastiInternalPort = 8013
	// KubeElastiOperatorLabel is the label only KubeElasti's operator pods
	// carry (its chart's controlPlaneLabels).
	KubeElastiOperatorLabel = "control-plane"
)

// kubeElastiLabels are the labels its chart puts on every object of
// release "elasti", with extra.
func kubeElastiLabels(extra map[string]string) map[string]string {
	return kubeElastiSelector(map[string]string{
		"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "elasti", "helm.sh/chart": "elasti-0.1.30",
	}, extra)
}

// kubeElastiSelector is what the chart's selectorLabels add for release
// "elasti": app.kubernetes.io/name is "elasti" for both components.
func kubeElastiSelector(extra ...map[string]string) map[string]string {
	m := map[string]string{"app.kubernetes.io/name": "elasti", "app.kubernetes.io/instance": "elasti"}
	for _, x := range extra {
		for k, v := range x {
			m[k] = v
		}
	}
	return m
}

// KubeElastiControlPlane creates KubeElasti's operator and resolver as its
// chart renders them in namespace ns: one replica each, the resolver's
// pods labelled app=elasti-resolver (which elasti's resolver Service also
// selects), its Services and Helm's release record. The pods are pinned
// to the kwok node, as the test bed needs: nothing answers on them,
// KubeElasti's binaries are not here.
func KubeElastiControlPlane(ctx context.Context, kube kubernetes.Interface, ns string) error {
	// Helm's release record: what `helm list` reads.
	release := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.elasti.v1", Namespace: ns, Labels: map[string]string{
			"owner": "helm", "name": "elasti", "status": "deployed", "version": "1",
		}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte("stand-in")},
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, release, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("KubeElasti's release record: %w", err)
	}
	deploy := func(name string, selector map[string]string, image string, port int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: kubeElastiLabels(nil)},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{
							Name: "main", Image: image,
							Ports: []corev1.ContainerPort{{ContainerPort: port}},
						}},
						NodeSelector: map[string]string{localcluster.FakeNodeLabel: localcluster.FakeNodeLabelValue},
						Tolerations:  []corev1.Toleration{FakeNodeToleration},
					},
				},
			},
		}
	}
	operatorSel := kubeElastiSelector(map[string]string{KubeElastiOperatorLabel: "controller-manager"})
	resolverSel := kubeElastiSelector(map[string]string{"app": "elasti-resolver"})
	for _, d := range []*appsv1.Deployment{
		deploy(KubeElastiOperatorDeployment, operatorSel, "ghcr.io/truefoundry/elasti-operator:0.1.30", kubeElastiInternalPort),
		deploy(KubeElastiResolverDeployment, resolverSel, "ghcr.io/truefoundry/elasti-resolver:0.1.30", KubeElastiProxyPort),
	} {
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("KubeElasti's deployment %s: %w", d.Name, err)
		}
	}
	port := func(name string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, TargetPort: intstr.FromInt32(p), Protocol: corev1.ProtocolTCP}
	}
	for _, s := range []*corev1.Service{
		{
			ObjectMeta: metav1.ObjectMeta{Name: KubeElastiResolverService, Namespace: ns, Labels: kubeElastiLabels(map[string]string{"app": "elasti-resolver"})},
			Spec: corev1.ServiceSpec{Selector: resolverSel, Ports: []corev1.ServicePort{
				port("http-resolver", kubeElastiInternalPort), port("http-resolver-reverse-proxy", KubeElastiProxyPort),
			}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: KubeElastiOperatorService, Namespace: ns, Labels: kubeElastiLabels(map[string]string{KubeElastiOperatorLabel: "controller-manager"})},
			Spec:       corev1.ServiceSpec{Selector: operatorSel, Ports: []corev1.ServicePort{port("custom-port", kubeElastiInternalPort)}},
		},
		{
			// Named as elasti's metrics Service is.
			ObjectMeta: metav1.ObjectMeta{Name: KubeElastiMetricsService, Namespace: ns, Labels: kubeElastiLabels(map[string]string{KubeElastiOperatorLabel: "controller-manager"})},
			Spec:       corev1.ServiceSpec{Selector: operatorSel, Ports: []corev1.ServicePort{port("https", 8443)}},
		},
	} {
		if _, err := kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("KubeElasti's service %s: %w", s.Name, err)
		}
	}
	return nil
}

// KubeElastiState is where KubeElasti left one ElastiService.
type KubeElastiState int

const (
	// KubeElastiNeverSlept: serving, never switched to proxy. KubeElasti
	// has added its finalizer and written status.mode "serve", nothing
	// else.
	KubeElastiNeverSlept KubeElastiState = iota
	// KubeElastiServing: serving, and asleep at least once before. The
	// private Service KubeElasti made at its first switch to proxy stays
	// until the ElastiService is deleted; the resolver slice is gone.
	KubeElastiServing
	// KubeElastiAsleep: the target at zero, the private Service and the
	// resolver slice in front, status.mode "proxy".
	KubeElastiAsleep
)

// KubeElastiService lays down an app name (Deployment and public Service,
// as App) under an ElastiService of the same name exactly as KubeElasti
// v0.1.30 would have left it in state. resolverIPs are KubeElasti's
// resolver pods' IPs, which its resolver slice lists.
//
// What KubeElasti writes, and elasti must adopt:
//   - the ElastiService: the legacy kind "deployments" its users write,
//     finalizer elasti.truefoundry.com/finalizer, and a status of mode and
//     lastReconciledTime only (no conditions, no observedGeneration);
//   - the private Service elasti-<svc>-pvt-<hash>: a deep copy of the public
//     Service (its labels, annotations and type too) without ClusterIP or
//     node ports, controlled by the ElastiService (controllerutil's
//     reference: controller and blockOwnerDeletion set);
//   - the resolver slice elasti-<svc>-endpointslice-to-resolver-<hash>:
//     only the kubernetes.io/service-name label (no managed-by, so the
//     EndpointSlice controller's mirroring and elasti's resolver both see
//     it as a stranger's), no owner reference, IPv4, one port named like
//     the Service's first port on the proxy port, and endpoints that are
//     bare addresses with no conditions (which consumers take as ready).
func (e *Env) KubeElastiService(name string, state KubeElastiState, resolverIPs []string) *elastiv1alpha1.ElastiService {
	e.T.Helper()
	ctx := e.Ctx()
	replicas := int32(1)
	if state == KubeElastiAsleep {
		replicas = 0
	}
	e.App(name, replicas)
	es := e.ElastiServiceWith(name, name, "deployments", name, func(es *elastiv1alpha1.ElastiService) {
		es.Finalizers = []string{kubeElastiFinalizer}
		es.Spec.MinTargetReplicas = 1
		es.Spec.CooldownPeriod = 900
	})
	mode := elastiv1alpha1.ModeServe
	if state == KubeElastiAsleep {
		mode = elastiv1alpha1.ModeProxy
	}
	es.Status = elastiv1alpha1.ElastiServiceStatus{Mode: mode, LastReconciledTime: ptr.To(metav1.NewTime(time.Now()))}
	es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).UpdateStatus(ctx, es, metav1.UpdateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	if state == KubeElastiNeverSlept {
		return es
	}
	public, err := e.Kube.CoreV1().Services(e.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	private := public.DeepCopy()
	private.ObjectMeta = metav1.ObjectMeta{
		Name: names.PrivateService(name), Namespace: e.NS, Labels: public.Labels, Annotations: public.Annotations,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: "ElastiService", Name: es.Name, UID: es.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
	private.Spec.ClusterIP, private.Spec.ClusterIPs = "", nil
	for i := range private.Spec.Ports {
		private.Spec.Ports[i].NodePort = 0
	}
	private.Status = corev1.ServiceStatus{}
	if _, err := e.Kube.CoreV1().Services(e.NS).Create(ctx, private, metav1.CreateOptions{FieldManager: "manager"}); err != nil {
		e.T.Fatal(err)
	}
	if state != KubeElastiAsleep {
		return es
	}
	slice := kubeElastiResolverSlice(public, resolverIPs)
	if _, err := e.Kube.DiscoveryV1().EndpointSlices(e.NS).Create(ctx, slice, metav1.CreateOptions{FieldManager: "manager"}); err != nil {
		e.T.Fatal(err)
	}
	return es
}

// KubeElastiFront writes svc's resolver slice as KubeElasti v0.1.30's
// operator does on every switch to proxy and every change of its
// resolver Deployment, for each ElastiService whose status.mode is
// "proxy": an Update of a fresh object, without resourceVersion, that
// replaces whatever the slice held (labels, owners, ports, endpoints) with
// its own form. resolverIPs are its resolver pods' IPs.
func (e *Env) KubeElastiFront(svc string, resolverIPs []string) error {
	ctx := e.Ctx()
	public, err := e.Kube.CoreV1().Services(e.NS).Get(ctx, svc, metav1.GetOptions{})
	if err != nil {
		return err
	}
	_, err = e.Kube.DiscoveryV1().EndpointSlices(e.NS).Update(ctx, kubeElastiResolverSlice(public, resolverIPs), metav1.UpdateOptions{FieldManager: "manager"})
	return err
}

// KubeElastiFinalize does what KubeElasti v0.1.30's operator does for an
// ElastiService being deleted that carries its finalizer: delete the
// resolver slice and the private Service of spec.service (by name, if
// they exist), then remove the finalizer with an Update. It does not
// scale the target: a target at zero stays there.
func (e *Env) KubeElastiFinalize(name string) error {
	ctx := e.Ctx()
	es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if es.DeletionTimestamp == nil {
		return fmt.Errorf("ElastiService %s is not being deleted", name)
	}
	err = e.Kube.DiscoveryV1().EndpointSlices(e.NS).Delete(ctx, names.ResolverSlice(es.Spec.Service), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = e.Kube.CoreV1().Services(e.NS).Delete(ctx, names.PrivateService(es.Spec.Service), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// A controller's Update that conflicts is requeued and read again;
	// elasti's operator may write the object's status in between.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		es, err := e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := es.Finalizers[:0]
		for _, f := range es.Finalizers {
			if f != kubeElastiFinalizer {
				kept = append(kept, f)
			}
		}
		es.Finalizers = kept
		_, err = e.Elasti.ElastiV1alpha1().ElastiServices(e.NS).Update(ctx, es, metav1.UpdateOptions{})
		return err
	})
}

// kubeElastiFinalizer is KubeElasti's finalizer, spelled out rather than
// taken from elasti's API, so a change on either side shows.
const kubeElastiFinalizer = "elasti.truefoundry.com/finalizer"

// kubeElastiResolverSlice is the resolver slice KubeElasti v0.1.30 writes
// for public: only the service-name label, no owner, IPv4, the Service's
// first port on the resolver's proxy port, bare addresses with no
// conditions.
func kubeElastiResolverSlice(public *corev1.Service, resolverIPs []string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.ResolverSlice(public.Name), Namespace: public.Namespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: public.Name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name: ptr.To(public.Spec.Ports[0].Name), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](KubeElastiProxyPort),
		}},
	}
	for _, ip := range resolverIPs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return slice
}
