package kubectlelasti

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// Waking is how far a waking ElastiService's pods are, as status's
// WAKING column and -o json's waking show it: the stage of the furthest
// of the pods its Service selects (package wakestage, the same stages the
// resolver's waiting page and wake status show), since when, and what
// keeps it there, when the pods' status says.
type Waking struct {
	Stage   wakestage.Stage `json:"stage"`
	Since   *metav1.Time    `json:"since,omitempty"`
	Problem string          `json:"problem,omitempty"`
}

// maxWakingReads bounds the ElastiServices whose pods one status reads
// (two calls each: the Service, its pods); past it WAKING shows the wake
// without its stage.
const maxWakingReads = 32

// wakingReader reads the stage of waking ElastiServices' pods for one
// status command, warning once on warn when it cannot.
type wakingReader struct {
	c      *Clients
	warn   io.Writer
	reads  int
	warned bool
}

// read returns es's Waking, nil when es is not waking.
func (r *wakingReader) read(ctx context.Context, es *elastiv1alpha1.ElastiService) *Waking {
	if !es.Status.Waking() {
		return nil
	}
	if r.reads >= maxWakingReads {
		r.warnOnce(fmt.Errorf("more than %d ElastiServices are waking: the stage of the rest is not read; name them to see it", maxWakingReads))
		return &Waking{}
	}
	r.reads++
	svc, err := r.c.Kube.CoreV1().Services(es.Namespace).Get(ctx, es.Spec.Service, metav1.GetOptions{})
	if err != nil {
		r.warnOnce(apiCall{verb: "get", resource: "services", kind: "service", name: es.Spec.Service, namespace: es.Namespace}.explain(err))
		return &Waking{}
	}
	if len(svc.Spec.Selector) == 0 {
		return &Waking{}
	}
	pods, err := r.c.Kube.CoreV1().Pods(es.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String(), Limit: maxWakingPods})
	if err != nil {
		r.warnOnce(apiCall{verb: "list", resource: "pods", namespace: es.Namespace}.explain(err))
		return &Waking{}
	}
	ptrs := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		ptrs[i] = &pods.Items[i]
	}
	p := wakestage.Of(ptrs)
	w := &Waking{Stage: p.Stage, Problem: p.Problem}
	if !p.Since.IsZero() {
		w.Since = &metav1.Time{Time: p.Since}
	}
	return w
}

// maxWakingPods bounds the pods listed for one waking Service: a wake
// from zero starts a few.
const maxWakingPods = 100

func (r *wakingReader) warnOnce(err error) {
	if r.warned || r.warn == nil {
		return
	}
	r.warned = true
	fmt.Fprintf(r.warn, "warning: WAKING shows no stage: %v\n", err)
}

// waking is the WAKING column: "-" when not waking, the stage, how long
// it has lasted and what keeps it there.
func waking(w *Waking, now time.Time) string {
	switch {
	case w == nil:
		return none
	case w.Stage == "":
		return "yes"
	}
	s := string(w.Stage)
	if w.Since != nil {
		s += " " + ago(w.Since, now)
	}
	if w.Problem != "" {
		s += " (" + w.Problem + ")"
	}
	return s
}
