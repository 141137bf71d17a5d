package wakeserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
)

// hpaScaler is a scaletargettest.Scaler that reads one HPA, as the operator's Scaler
// reads its cache.
type hpaScaler struct {
	*scaletargettest.Scaler
	hpa *autoscalingv2.HorizontalPodAutoscaler
}

func (h hpaScaler) HPA(namespace, name string) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if h.hpa == nil || h.hpa.Namespace != namespace || h.hpa.Name != name {
		return nil, apierrors.NewNotFound(autoscalingv2.Resource("horizontalpodautoscalers"), name)
	}
	return h.hpa, nil
}

// setupHPA serves the wake endpoint for shop/web, whose ElastiService has
// minTargetReplicas minTarget and names the HPA web-hpa.
func setupHPA(t *testing.T, scaler hpaScaler, minTarget int32) string {
	t.Helper()
	dir := shopWebDirectory(minTarget, &elastiv1alpha1.AutoscalerSpec{Type: elastiv1alpha1.AutoscalerTypeHPA, Name: "web-hpa"})
	s := New(context.Background(), dir, scaler, &fakeWakes{}, func() bool { return true }, &outcomes{}, DefaultConfig())
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + Path
}

func webHPA(minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
		},
	}
}

func postBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A wake from zero scales to the HPA's minReplicas when it is above
// minTargetReplicas: the count the HPA would raise it to at its next pass.
func TestWakeWithAnHPARaisesToItsMinimum(t *testing.T) {
	scaler := hpaScaler{Scaler: &scaletargettest.Scaler{}, hpa: webHPA(3, 5)}
	url := setupHPA(t, scaler, 1)
	code, msg := postBody(t, url)
	if code != http.StatusOK || scaler.Replicas() != 3 {
		t.Fatalf("status %d (%s), replicas %d; want 200 and the HPA's minimum 3", code, msg, scaler.Replicas())
	}
	if !strings.Contains(msg, "to 3 replicas") {
		t.Errorf("message %q does not say the count scaled to", msg)
	}
}

// A wake from zero never goes past the HPA's maxReplicas, which the HPA
// would scale it back to at its next pass.
func TestWakeWithAnHPAStopsAtItsMaximum(t *testing.T) {
	scaler := hpaScaler{Scaler: &scaletargettest.Scaler{}, hpa: webHPA(1, 2)}
	url := setupHPA(t, scaler, 4)
	if code, msg := postBody(t, url); code != http.StatusOK || scaler.Replicas() != 2 {
		t.Fatalf("status %d (%s), replicas %d; want 200 and the HPA's maximum 2", code, msg, scaler.Replicas())
	}
}

// Above zero the HPA decides the count: a target it holds at one replica,
// below minTargetReplicas, is up, and a wake request does not raise it.
func TestWakeLeavesAnHPAsCountAboveZero(t *testing.T) {
	scaler := hpaScaler{Scaler: scaletargettest.New(1), hpa: webHPA(1, 5)}
	url := setupHPA(t, scaler, 3)
	code, msg := postBody(t, url)
	if code != http.StatusOK || scaler.Calls() != 0 || scaler.Replicas() != 1 {
		t.Fatalf("status %d (%s), %d scale calls, replicas %d; want 200, none, and the HPA's 1", code, msg, scaler.Calls(), scaler.Replicas())
	}
}

// An HPA that scales another workload is not this target's: the wake is
// the one without an HPA.
func TestWakeIgnoresAnHPAOfAnotherTarget(t *testing.T) {
	other := webHPA(4, 5)
	other.Spec.ScaleTargetRef.Name = "api"
	scaler := hpaScaler{Scaler: scaletargettest.New(1), hpa: other}
	url := setupHPA(t, scaler, 2)
	if code, msg := postBody(t, url); code != http.StatusOK || scaler.Replicas() != 2 {
		t.Fatalf("status %d (%s), replicas %d; want 200 and minTargetReplicas 2", code, msg, scaler.Replicas())
	}
}
