package scaletarget

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
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

// KEDAPauser pauses and resumes ScaledObjects; Scaler is one.
type KEDAPauser interface {
	SetKEDAPaused(ctx context.Context, namespace, name string, paused bool) error
}

// PauseKEDA pauses at zero the KEDA ScaledObject an ElastiService in
// namespace names as its autoscaler, before a scale-down, so that KEDA does
// not scale the target straight back up. Without a KEDA autoscaler it does
// nothing.
func PauseKEDA(ctx context.Context, p KEDAPauser, namespace string, autoscaler *elastiv1alpha1.AutoscalerSpec) error {
	return setKEDAPaused(ctx, p, namespace, autoscaler, true)
}

// ResumeKEDA hands the target back to the KEDA ScaledObject an ElastiService
// in namespace names as its autoscaler, after a wake (see Wake) or when the
// ElastiService goes away. Without a KEDA autoscaler, or when the
// ScaledObject does not exist, it does nothing.
func ResumeKEDA(ctx context.Context, p KEDAPauser, namespace string, autoscaler *elastiv1alpha1.AutoscalerSpec) error {
	return ignoreMissingScaledObject(setKEDAPaused(ctx, p, namespace, autoscaler, false))
}

func setKEDAPaused(ctx context.Context, p KEDAPauser, namespace string, autoscaler *elastiv1alpha1.AutoscalerSpec, paused bool) error {
	if autoscaler == nil || autoscaler.Type != elastiv1alpha1.AutoscalerTypeKEDA {
		return nil
	}
	return p.SetKEDAPaused(ctx, namespace, autoscaler.Name, paused)
}
