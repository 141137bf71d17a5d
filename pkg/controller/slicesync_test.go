package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

func TestSyncSliceServiceEnqueues(t *testing.T) {
	f := newFixture(t)
	f.elastiServices = append(f.elastiServices,
		withStatus(newElastiService("proxy", "web", "web"), elastiv1alpha1.ModeProxy, metav1.ConditionTrue, ReasonReconciled),
		withStatus(newElastiService("serve", "api", "api"), elastiv1alpha1.ModeServe, metav1.ConditionTrue, ReasonReconciled),
		newElastiService("new", "new", "new"))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	keys := capture(c)

	// The resolver's endpoints matter to every ElastiService not serving.
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: resolverNamespace, Name: resolverService}))
	wantKeys(t, "resolver slices", keys(), "shop/new", "shop/proxy")
	// Any other Service's endpoints matter to the ElastiServices fronting it.
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: testNamespace, Name: "api"}))
	wantKeys(t, "shop/api slices", keys(), "shop/serve")
	wantNoError(t, c.enqueueForSliceService(ctx, types.NamespacedName{Namespace: testNamespace, Name: "unrelated"}))
	wantKeys(t, "shop/unrelated slices", keys())
}
