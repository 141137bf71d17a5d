package scaletarget

import (
	"context"
	"fmt"
	"testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

type recordingPauser struct{ calls []string }

func (r *recordingPauser) SetKEDAPaused(_ context.Context, namespace, name string, paused bool) error {
	r.calls = append(r.calls, fmt.Sprintf("%s/%s paused=%v", namespace, name, paused))
	return nil
}

func TestPauseAndResumeKEDAOnlyForAKEDAAutoscaler(t *testing.T) {
	keda := &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeKEDA, Name: "so"}
	hpa := &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "h"}
	for _, a := range []*elastiv1alpha1.AutoscalerSpec{nil, hpa, keda} {
		r := &recordingPauser{}
		if err := PauseKEDA(t.Context(), r, "ns", a); err != nil {
			t.Fatal(err)
		}
		if err := ResumeKEDA(t.Context(), r, "ns", a); err != nil {
			t.Fatal(err)
		}
		want := "[]"
		if a == keda {
			want = "[ns/so paused=true ns/so paused=false]"
		}
		if got := fmt.Sprint(r.calls); got != want {
			t.Errorf("autoscaler %+v: calls %s, want %s", a, got, want)
		}
	}
}
