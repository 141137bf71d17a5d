package idle

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
)

// StatusPatcher writes lastScaledUpTime with a merge patch on the status
// subresource: it touches one field, so it never conflicts with the
// controller's status updates and never overwrites them.
type StatusPatcher struct {
	Client versioned.Interface
}

// RecordScaledUp implements StatusRecorder.
func (p StatusPatcher) RecordScaledUp(ctx context.Context, es types.NamespacedName, at time.Time) error {
	return p.patch(ctx, es, "lastScaledUpTime", metav1.NewTime(at))
}

// RecordHeld implements StatusRecorder.
func (p StatusPatcher) RecordHeld(ctx context.Context, es types.NamespacedName, held time.Duration) error {
	return p.patch(ctx, es, "lastHeld", metav1.Duration{Duration: held})
}

// patch sets one status field.
func (p StatusPatcher) patch(ctx context.Context, es types.NamespacedName, field string, value any) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{field: value}})
	if err != nil {
		return err
	}
	_, err = p.Client.ElastiV1alpha1().ElastiServices(es.Namespace).Patch(ctx, es.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("record %s on %s: %w", field, es, err)
	}
	return nil
}
