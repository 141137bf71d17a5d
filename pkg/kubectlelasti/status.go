package kubectlelasti

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// none is what a table shows for a value the status does not have yet.
const none = "-"

var statusCommand = subcommand{
	name: "status", args: "[NAME...] ",
	summary: "List ElastiServices: mode, replicas, last wake, cold-start p50 and time asleep",
	help: `Reads each ElastiService's status as the operator wrote it; "-" is a value
it has not written (yet). COLD START P50 is the median of the latest cold
starts (status.recentColdStarts); TIME ASLEEP adds the current sleep, if
any, to the sleeps that have ended.

Examples:
  kubectl elasti status -n shop
  kubectl elasti status -A -o wide
  kubectl elasti status web -o json
`,
	bind: func(a *App, fs *flag.FlagSet) func(context.Context, *Clients, []string) error {
		var all bool
		var output string
		fs.BoolVar(&all, "all-namespaces", false, "List ElastiServices in every namespace.")
		fs.BoolVar(&all, "A", false, "")
		fs.StringVar(&output, "output", "", "Output format: json, yaml or wide; a table when empty.")
		fs.StringVar(&output, "o", "", "")
		return func(ctx context.Context, c *Clients, names []string) error {
			return a.status(ctx, c, names, all, output)
		}
	},
}

// Summary is one ElastiService as status shows it, and as -o json and -o
// yaml print it.
type Summary struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Service   string `json:"service"`
	// Target is Kind/name.
	Target string `json:"target"`
	Mode   string `json:"mode,omitempty"`
	// Ready is the Ready condition's status; empty before the first one.
	Ready          string `json:"ready,omitempty"`
	TargetReplicas int32  `json:"targetReplicas"`
	// Asleep: in proxy mode with the target at zero.
	Asleep        bool             `json:"asleep"`
	LastWake      *metav1.Time     `json:"lastWake,omitempty"`
	LastSleep     *metav1.Time     `json:"lastSleep,omitempty"`
	Wakes         int64            `json:"wakes"`
	LastColdStart *metav1.Duration `json:"lastColdStart,omitempty"`
	ColdStartP50  *metav1.Duration `json:"coldStartP50,omitempty"`
	TimeAsleep    *metav1.Duration `json:"timeAsleep,omitempty"`
	// SleepRequestedAt is a sleep request the operator has yet to carry
	// out.
	SleepRequestedAt *metav1.Time `json:"sleepRequestedAt,omitempty"`
}

// SummaryList is what -o json and -o yaml print.
type SummaryList struct {
	Items []Summary `json:"items"`
}

// Summarize is es's Summary at now.
func Summarize(es *elastiv1alpha1.ElastiService, now time.Time) Summary {
	st := es.Status
	target := es.Spec.ScaleTargetRef.Canonical()
	s := Summary{
		Namespace: es.Namespace, Name: es.Name, Service: es.Spec.Service,
		Target: target.Kind + "/" + target.Name,
		Mode:   st.Mode, TargetReplicas: st.Replicas(), Asleep: st.Asleep(),
		LastWake: st.LastScaledUpTime, LastSleep: st.LastScaledDownTime, Wakes: st.Wakes,
		LastColdStart: st.LastColdStart,
	}
	if c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionReady); c != nil {
		s.Ready = string(c.Status)
	}
	if p, ok := Median(st.RecentColdStarts); ok {
		s.ColdStartP50 = &metav1.Duration{Duration: p}
	}
	if d, ok := TimeAsleep(st, now); ok {
		s.TimeAsleep = &metav1.Duration{Duration: d}
	}
	if at, pending := elastiv1alpha1.SleepRequest(es, lastWake(es)); pending {
		s.SleepRequestedAt = &metav1.Time{Time: at}
	}
	return s
}

// lastWake is status.lastScaledUpTime, or zero.
func lastWake(es *elastiv1alpha1.ElastiService) time.Time {
	if es.Status.LastScaledUpTime == nil {
		return time.Time{}
	}
	return es.Status.LastScaledUpTime.Time
}

// Median is the cold-start p50: the middle of ds, or the mean of the two
// middle ones; false for none.
func Median(ds []metav1.Duration) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	sorted := make([]time.Duration, len(ds))
	for i, d := range ds {
		sorted[i] = d.Duration
	}
	slices.Sort(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 1 {
		return sorted[mid], true
	}
	return sorted[mid-1] + (sorted[mid]-sorted[mid-1])/2, true
}

// TimeAsleep is the time the target spent at zero as the status says it
// (ElastiServiceStatus.AsleepFor); false when the status records no sleep.
func TimeAsleep(st elastiv1alpha1.ElastiServiceStatus, now time.Time) (time.Duration, bool) {
	return st.AsleepFor(now), st.TimeAsleep != nil || st.Asleep()
}

func (a *App) status(ctx context.Context, c *Clients, names []string, all bool, output string) error {
	switch output {
	case OutputTable, OutputWide, OutputJSON, OutputYAML:
	default:
		return usageError{fmt.Sprintf("unknown output format %q: use json, yaml or wide", output)}
	}
	ns := c.Namespace
	if all {
		ns = ""
	}
	list, err := c.Elasti.ElastiV1alpha1().ElastiServices(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return apiCall{verb: "list", resource: "elastiservices", namespace: ns}.explain(err)
	}
	items := list.Items
	slices.SortFunc(items, func(x, y elastiv1alpha1.ElastiService) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	if len(names) > 0 {
		var picked []elastiv1alpha1.ElastiService
		for _, name := range names {
			// With -A, a name may be in several namespaces: all of them.
			found := false
			for _, es := range items {
				if es.Name == name {
					picked, found = append(picked, es), true
				}
			}
			if !found {
				return apiCall{kind: "elastiservice", name: name, namespace: ns}.explain(notFound(name))
			}
		}
		items = picked
	}
	now := a.Now()
	summaries := make([]Summary, 0, len(items))
	for i := range items {
		summaries = append(summaries, Summarize(&items[i], now))
	}
	switch output {
	case OutputJSON:
		out, err := json.MarshalIndent(SummaryList{Items: summaries}, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.Out, "%s\n", out)
		return err
	case OutputYAML:
		out, err := yaml.Marshal(SummaryList{Items: summaries})
		if err != nil {
			return err
		}
		_, err = a.Out.Write(out)
		return err
	}
	if len(summaries) == 0 {
		if all {
			fmt.Fprintln(a.Err, "No resources found")
		} else {
			fmt.Fprintf(a.Err, "No resources found in %s namespace.\n", ns)
		}
		return nil
	}
	return PrintTable(a.Out, summaries, all, output == OutputWide, now)
}

// PrintTable writes summaries as kubectl prints a table: a NAMESPACE
// column with -A, more columns with -o wide.
func PrintTable(w io.Writer, summaries []Summary, namespaces, wide bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	header := "NAME\tMODE\tREPLICAS\tLAST WAKE\tCOLD START P50\tTIME ASLEEP"
	if namespaces {
		header = "NAMESPACE\t" + header
	}
	if wide {
		header += "\tWAKES\tLAST COLD START\tREADY\tSERVICE\tTARGET"
	}
	fmt.Fprintln(tw, header)
	for _, s := range summaries {
		replicas := none
		if s.Mode != "" {
			replicas = strconv.Itoa(int(s.TargetReplicas))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", s.Name, orNone(s.Mode), replicas, ago(s.LastWake, now), coldStart(s.ColdStartP50), age(s.TimeAsleep))
		if namespaces {
			row = s.Namespace + "\t" + row
		}
		if wide {
			row += fmt.Sprintf("\t%d\t%s\t%s\t%s\t%s", s.Wakes, coldStart(s.LastColdStart), orNone(s.Ready), s.Service, s.Target)
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// ago is how long before now t was, as kubectl's AGE column shows it.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil {
		return none
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// age is a long duration, as kubectl shows ages.
func age(d *metav1.Duration) string {
	if d == nil {
		return none
	}
	return duration.HumanDuration(d.Duration)
}

// coldStart is a short duration with the precision that matters for it:
// milliseconds under a second, tenths under a minute.
func coldStart(d *metav1.Duration) string {
	if d == nil {
		return none
	}
	switch v := d.Duration; {
	case v < time.Second:
		return v.Round(time.Millisecond).String()
	case v < time.Minute:
		return v.Round(100 * time.Millisecond).String()
	default:
		return v.Round(time.Second).String()
	}
}
