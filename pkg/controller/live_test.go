package controller

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/names"
)

// podEP is a ready endpoint of pod name with uid, as the EndpointSlice
// controller writes it.
func podEP(ip, name, uid string) discoveryv1.Endpoint {
	e := ep(ip, ptr.To(true), false)
	e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: name, UID: types.UID(uid)}
	return e
}

// pod is a pod with uid, controlled by owner when it is not nil.
func pod(name, uid string, owner metav1.Object, kind string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID(uid)}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind(kind))}
	}
	return p
}

// replicaSet has replicas; its controller has acted on generation observed
// of generation 3.
func replicaSet(replicas int32, observed int64) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5c4", Namespace: testNamespace, UID: "rs-uid", Generation: 3},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status:     appsv1.ReplicaSetStatus{ObservedGeneration: observed},
	}
}

// leaveProxySeed is a wake whose only ready endpoint is old, the pod of the
// last scale-down, listed as ready by an EndpointSlice controller that is
// behind (as after an apiserver restart), after the fence lapsed.
func leaveProxySeed(f *fixture, objs ...runtime.Object) *elastiv1alpha1.ElastiService {
	f.apiOnly = append(f.apiOnly, objs...)
	return wakingSeed(f, fenceTimeout+time.Second, podEP("10.1.0.1", "web-old", "uid-old"))
}

// expectLeave expects the sync to end in mode, with the resolver slice
// deleted if that is serve.
func expectLeave(f *fixture, es *elastiv1alpha1.ElastiService, mode string) {
	if mode == elastiv1alpha1.ModeServe {
		f.expectKube(expectDelete(endpointSlicesResource, names.ResolverSlice("web")))
		f.expectEvents("Normal " + ReasonSwitchedToServe)
	}
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, mode, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
}

// The resolver is taken away only for a pod that stays: one that exists
// with the endpoint's UID, is not being deleted, and whose controller has
// acted on its latest spec, which keeps pods. Otherwise the Service's
// traffic would go to a pod that is gone or going, and the Service be left
// with no endpoint once the controllers caught up.
func TestLeavingProxyNeedsAPodThatStays(t *testing.T) {
	rs := replicaSet(2, 3)
	deleting := pod("web-old", "uid-old", rs, "ReplicaSet")
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	deleting.Finalizers = []string{"test/keep"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: testNamespace, Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1)}, Status: appsv1.StatefulSetStatus{ObservedGeneration: 2}}
	for _, tc := range []struct {
		name  string
		objs  []runtime.Object
		owner string // the owner's resource, read after the pod
		serve bool
	}{
		{"the pod is gone", nil, "", false},
		{"a new pod has its name", []runtime.Object{pod("web-old", "uid-new", nil, "")}, "", false},
		{"the pod is being deleted", []runtime.Object{deleting}, "", false},
		{"its ReplicaSet has not acted on its spec", []runtime.Object{pod("web-old", "uid-old", rs, "ReplicaSet"), replicaSet(2, 2)}, "replicasets", false},
		{"its ReplicaSet is at zero", []runtime.Object{pod("web-old", "uid-old", rs, "ReplicaSet"), replicaSet(0, 3)}, "replicasets", false},
		{"its ReplicaSet is gone", []runtime.Object{pod("web-old", "uid-old", rs, "ReplicaSet")}, "replicasets", false},
		{"its ReplicaSet has acted and kept it", []runtime.Object{pod("web-old", "uid-old", rs, "ReplicaSet"), replicaSet(2, 3)}, "replicasets", true},
		{"its StatefulSet has acted and kept it", []runtime.Object{pod("web-old", "uid-old", sts, "StatefulSet"), sts}, "statefulsets", true},
		{"it has no controller", []runtime.Object{pod("web-old", "uid-old", nil, "")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := leaveProxySeed(f, tc.objs...)
			f.expectKube(core.NewGetAction(podsResource, testNamespace, "web-old"))
			switch tc.owner {
			case "replicasets":
				f.expectKube(core.NewGetAction(replicaSetsResource, testNamespace, "web-5c4"))
			case "statefulsets":
				f.expectKube(core.NewGetAction(statefulSetsResource, testNamespace, "web"))
			}
			mode := elastiv1alpha1.ModeProxy
			if tc.serve {
				mode = elastiv1alpha1.ModeServe
			}
			expectLeave(f, es, mode)
			wantNoError(t, f.run(keyOf(es)))
		})
	}
}

// A woken pod is checked like any other, and one that stays is enough.
func TestLeavingProxyForAWokenPod(t *testing.T) {
	f := newFixture(t)
	es := wakingSeed(f, 5*time.Second, podEP("10.1.0.2", "web-new", "uid-new"))
	f.apiOnly = append(f.apiOnly, pod("web-new", "uid-new", nil, ""))
	f.expectKube(core.NewGetAction(podsResource, testNamespace, "web-new"))
	expectLeave(f, es, elastiv1alpha1.ModeServe)
	wantNoError(t, f.run(keyOf(es)))
}

// Serving with no resolver slice, there is nothing to take away: nothing
// is read.
func TestServingReadsNoPod(t *testing.T) {
	f := newFixture(t)
	es := servingSeed(f)
	f.endpointSlices = []*discoveryv1.EndpointSlice{targetSlice("web", podEP("10.1.0.1", "web-1", "uid-1"))}
	f.expectElasti(expectStatusUpdate(withPorts(expectedStatus(es, elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled, f.clock.Now()), webPorts()...)))
	wantNoError(t, f.run(keyOf(es)))
}

// An install whose RBAC predates the check may not read pods: the
// EndpointSlices are trusted as before, rather than never serving again.
// Any other error is retried.
func TestLeavingProxyWhenPodsCannotBeRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		serve bool
	}{
		{"forbidden", apierrors.NewForbidden(podsResource.GroupResource(), "web-old", errors.New("no")), true},
		{"unavailable", apierrors.NewServiceUnavailable("restarting"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			es := leaveProxySeed(f)
			_, ctx := ktesting.NewTestContext(t)
			c := f.newController(ctx)
			f.kubeClient.PrependReactor("get", "pods", func(core.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			f.expectKube(core.NewGetAction(podsResource, testNamespace, "web-old"))
			if tc.serve {
				expectLeave(f, es, elastiv1alpha1.ModeServe)
			}
			err := c.syncElastiService(ctx, keyOf(es))
			f.verify()
			if tc.serve != (err == nil) {
				t.Errorf("sync returned %v", err)
			}
		})
	}
}
