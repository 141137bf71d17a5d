// Package clusterviewtest runs the cluster view over fake clientsets, for
// the tests of the packages above it.
package clusterviewtest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	elastifake "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned/fake"
	elastiinformers "github.com/elasti-dev/elasti/pkg/generated/informers/externalversions"
	"github.com/elasti-dev/elasti/pkg/nsbudget"
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
