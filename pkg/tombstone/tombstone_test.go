package tombstone

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestObject(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if got, ok := Object[*corev1.Service](svc); !ok || got != svc {
		t.Errorf("plain object: %v %v", got, ok)
	}
	if got, ok := Object[*corev1.Service](cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: svc}); !ok || got != svc {
		t.Errorf("tombstone: %v %v", got, ok)
	}
	if _, ok := Object[*corev1.Pod](svc); ok {
		t.Error("a Service read as a Pod")
	}
	if _, ok := Object[*corev1.Service](cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: "garbage"}); ok {
		t.Error("a tombstone of something else read as a Service")
	}
}
