package controller

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/elasti-dev/elasti/pkg/scaletarget"
)

// Dropped keys from every queue reach the handler with the object's kind.
func TestOnDropNamesTheQueueAndTheObject(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var got []string
	drops := dropReports{func(_ context.Context, queue string, o DroppedObject, err error) {
		got = append(got, queue+" "+o.Kind+" "+o.Namespace+"/"+o.Name+" "+err.Error())
	}}
	boom := errors.New("boom")
	// Waiting for a missing object is no failure: not reported.
	drops.elastiService(ctx, types.NamespacedName{Namespace: "shop", Name: "idle"}, &errWaiting{reason: ReasonTargetNotFound, message: "x"})
	drops.elastiService(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	drops.target(ctx, scaletarget.Ref{Kind: "StatefulSet", Namespace: "shop", Name: "db"}, boom)
	drops.service(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	drops.privateService(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	// No handler: nothing to report to.
	dropReports{}.elastiService(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	want := []string{
		"elastiservice ElastiService shop/web boom",
		"scaletarget StatefulSet shop/db boom",
		"endpointslice Service shop/web boom",
		"privateservice ElastiService shop/web boom",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("drop %d: %q, want %q", i, got[i], want[i])
		}
	}
}
