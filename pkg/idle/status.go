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
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"lastScaledUpTime": metav1.NewTime(at)}})
	if err != nil {
		return err
	}
	_, err = p.Client.ElastiV1alpha1().ElastiServices(es.Namespace).Patch(ctx, es.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("record lastScaledUpTime on %s: %w", es, err)
	}
	return nil
}
