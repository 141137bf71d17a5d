package scaletarget

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ScaledObjectGVR is KEDA's ScaledObject resource.
var ScaledObjectGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// KEDA's pause annotations. While paused with paused-replicas=0, KEDA holds
// the target at zero instead of fighting the scale-down.
const (
	KEDAPausedAnnotation         = "autoscaling.keda.sh/paused"
	KEDAPausedReplicasAnnotation = "autoscaling.keda.sh/paused-replicas"
)

// SetKEDAPaused pauses a ScaledObject at zero replicas, or resumes it.
func (s *Scaler) SetKEDAPaused(ctx context.Context, namespace, name string, paused bool) error {
	patch := []byte(`{"metadata":{"annotations":{"` + KEDAPausedAnnotation + `":"false","` + KEDAPausedReplicasAnnotation + `":null}}}`)
	if paused {
		patch = []byte(`{"metadata":{"annotations":{"` + KEDAPausedAnnotation + `":"true","` + KEDAPausedReplicasAnnotation + `":"0"}}}`)
	}
	_, err := s.dynamic.Resource(ScaledObjectGVR).Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set KEDA ScaledObject %s/%s paused=%v: %w", namespace, name, paused, err)
	}
	return nil
}
