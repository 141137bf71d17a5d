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
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	var got []string
	c.OnDrop(func(_ context.Context, queue string, o DroppedObject, err error) {
		got = append(got, queue+" "+o.Kind+" "+o.Namespace+"/"+o.Name+" "+err.Error())
	})
	boom := errors.New("boom")
	// Waiting for a missing object is no failure: not reported.
	c.elastiServiceQueue.OnDrop(ctx, types.NamespacedName{Namespace: "shop", Name: "idle"}, &errWaiting{reason: ReasonTargetNotFound, message: "x"})
	c.elastiServiceQueue.OnDrop(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	c.targetQueue.OnDrop(ctx, scaletarget.Ref{Kind: "StatefulSet", Namespace: "shop", Name: "db"}, boom)
	c.sliceQueue.OnDrop(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}, boom)
	want := []string{
		"elastiservice ElastiService shop/web boom",
		"scaletarget StatefulSet shop/db boom",
		"endpointslice Service shop/web boom",
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
