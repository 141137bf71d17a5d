package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// NotReadyName is the gauge of ElastiServices whose Ready condition is not
// True; the chart's ElastiServicesNotReady alert reads it.
const NotReadyName = "elasti_operator_not_ready_elastiservices"

// RegisterNotReady exports how many ElastiServices are not Ready (their
// Ready condition missing, False or Unknown), read from list at each
// scrape. Like the sleep totals it has no labels, so it does not grow with
// the fleet (status.conditions says which and why), and only the leader
// reports it: a follower's view is the same, and a sum over replicas would
// count each ElastiService once per replica.
func (m *Operator) RegisterNotReady(list func() ([]*elastiv1alpha1.ElastiService, error), leading func() bool) {
	m.Registry.MustRegister(&notReady{list: list, leading: leading,
		desc: prometheus.NewDesc(NotReadyName, "ElastiServices whose Ready condition is not True (missing, False or Unknown).", nil, nil)})
}

type notReady struct {
	list    func() ([]*elastiv1alpha1.ElastiService, error)
	leading func() bool
	desc    *prometheus.Desc
}

func (n *notReady) Describe(ch chan<- *prometheus.Desc) { ch <- n.desc }

func (n *notReady) Collect(ch chan<- prometheus.Metric) {
	if !n.leading() {
		return
	}
	all, err := n.list()
	if err != nil {
		return
	}
	count := 0
	for _, es := range all {
		if !meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionReady) {
			count++
		}
	}
	ch <- prometheus.MustNewConstMetric(n.desc, prometheus.GaugeValue, float64(count))
}
