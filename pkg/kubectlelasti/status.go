package kubectlelasti

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/liggitt/tabwriter"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Output formats of -o that are the plugin's own; the others are
// cli-runtime's printers and custom-columns=.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputName  = "name"
)

// none is what a table shows for a value the status does not have yet.
const none = "-"

func (s *session) statusCommand() *cobra.Command {
	var o statusOptions
	o.print = genericclioptions.NewPrintFlags("")
	cmd := s.subcommand("status [NAME...]", "List ElastiServices: mode, replicas, last wake, time to Ready, what clients waited, time asleep and a wake's stage", `Reads each ElastiService's status as the operator wrote it; "-" is a value
it has not written (yet). READY AFTER P50 is the median time from a
scale-up from zero to the first Ready pod (status.recentColdStarts, the
kubelet's Ready); LAST HELD is how long the latest held request waited,
as the resolver measured it (status.lastHeld, its X-Elasti-Cold-Start),
which is less when the resolver's own readiness check passed first. TIME
ASLEEP adds the current sleep, if any, to the sleeps that have ended.
WAKING is, while a wake is under way, the stage of the furthest of the
Service's pods (WaitingForNode, PullingImage, Initializing, Starting),
how long it has lasted and what keeps it there (Unschedulable,
ImagePullBackOff, CrashLoopBackOff...), read from the pods.

-o json and -o yaml print a List (apiVersion v1, kind List, as kubectl
prints objects that are not one API list) of ElastiServiceSummary items,
the columns' values; -o jsonpath=, go-template= and custom-columns= read
the same. -o name prints the ElastiServices' names, as kubectl get does.
--watch prints each change after the list, by a watch.

Examples:
  kubectl elasti status -n shop
  kubectl elasti status -A -o wide
  kubectl elasti status web -o json
  kubectl elasti status -o jsonpath='{.items[*].coldStartP50}'
  kubectl elasti status -o custom-columns=NAME:.name,WAKES:.wakes
  kubectl elasti status web --watch
`, anyNames, func(ctx context.Context, c *Clients, names []string) error {
		return s.app.status(ctx, c, names, o)
	})
	fs := cmd.Flags()
	fs.BoolVarP(&o.all, "all-namespaces", "A", false, "List ElastiServices in every namespace.")
	fs.BoolVarP(&o.watch, "watch", "w", false, "After listing, print each change, until interrupted or --request-timeout.")
	fs.StringVarP(o.print.OutputFormat, "output", "o", "",
		"Output format: wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, custom-columns=SPEC, go-template=TEMPLATE; a table when empty.")
	o.print.TemplatePrinterFlags.AddFlags(cmd)
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"wide", "json", "yaml", "name", "jsonpath=", "jsonpath-as-json=", "custom-columns=", "go-template="},
			cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	return cmd
}

// statusOptions are status's flags.
type statusOptions struct {
	all, watch bool
	print      *genericclioptions.PrintFlags
}

// Summary is one ElastiService as status shows it, and as -o json and -o
// yaml print it.
type Summary struct {
	// TypeMeta is elasti's API group and kind ElastiServiceSummary: the
	// plugin's view of an ElastiService, not a resource the apiserver
	// serves.
	metav1.TypeMeta `json:",inline"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	Service         string `json:"service"`
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
	LastHeld      *metav1.Duration `json:"lastHeld,omitempty"`
	TimeAsleep    *metav1.Duration `json:"timeAsleep,omitempty"`
	// SleepRequestedAt is a sleep request the operator has yet to carry
	// out.
	SleepRequestedAt *metav1.Time `json:"sleepRequestedAt,omitempty"`
	// Waking is how far the pods of a wake under way are (waking.go).
	Waking *Waking `json:"waking,omitempty"`
}

// SummaryKind is Summary's kind.
const SummaryKind = "ElastiServiceSummary"

// SummaryList is what -o json and -o yaml print: a v1 List, as kubectl
// prints objects that are not one resource's list. ElastiServiceList
// would say its items are ElastiServices, which kubectl apply could take.
type SummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []Summary `json:"items"`
}

// NewSummaryList is items as a v1 List.
func NewSummaryList(items []Summary) *SummaryList {
	return &SummaryList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}, Items: items}
}

// DeepCopyObject is runtime.Object's, so that cli-runtime's printers
// print a Summary.
func (s *Summary) DeepCopyObject() runtime.Object {
	out := *s
	out.LastWake = s.LastWake.DeepCopy()
	out.LastSleep = s.LastSleep.DeepCopy()
	out.SleepRequestedAt = s.SleepRequestedAt.DeepCopy()
	if s.Waking != nil {
		w := *s.Waking
		w.Since = s.Waking.Since.DeepCopy()
		out.Waking = &w
	}
	for _, d := range []**metav1.Duration{&out.LastColdStart, &out.ColdStartP50, &out.LastHeld, &out.TimeAsleep} {
		if *d != nil {
			c := **d
			*d = &c
		}
	}
	return &out
}

// DeepCopyObject is runtime.Object's.
func (l *SummaryList) DeepCopyObject() runtime.Object {
	out := &SummaryList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Summary))
	}
	return out
}

// Summarize is es's Summary at now.
func Summarize(es *elastiv1alpha1.ElastiService, now time.Time) Summary {
	st := es.Status
	target := es.Spec.ScaleTargetRef.Canonical()
	s := Summary{
		TypeMeta:  metav1.TypeMeta{APIVersion: elastiv1alpha1.SchemeGroupVersion.String(), Kind: SummaryKind},
		Namespace: es.Namespace, Name: es.Name, Service: es.Spec.Service,
		Target: target.Kind + "/" + target.Name,
		Mode:   st.Mode, TargetReplicas: st.Replicas(), Asleep: st.Asleep(),
		LastWake: st.LastScaledUpTime, LastSleep: st.LastScaledDownTime, Wakes: st.Wakes,
		LastColdStart: st.LastColdStart, LastHeld: st.LastHeld,
	}
	if c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionReady); c != nil {
		s.Ready = string(c.Status)
	}
	if p, ok := st.MedianColdStart(); ok {
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

// TimeAsleep is the time the target spent at zero as the status says it
// (ElastiServiceStatus.AsleepFor); false when the status records no sleep.
func TimeAsleep(st elastiv1alpha1.ElastiServiceStatus, now time.Time) (time.Duration, bool) {
	return st.AsleepFor(now), st.TimeAsleep != nil || st.Asleep()
}

func (a *App) status(ctx context.Context, c *Clients, names []string, o statusOptions) error {
	p, err := newStatusPrinter(o)
	if err != nil {
		return err
	}
	wakes := &wakingReader{c: c, warn: a.Err}
	p.waking = func(es *elastiv1alpha1.ElastiService) *Waking { return wakes.read(ctx, es) }
	ns := c.Namespace
	if o.all {
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
	if len(items) == 0 && p.table() {
		if o.all {
			fmt.Fprintln(a.Err, "No resources found")
		} else {
			fmt.Fprintf(a.Err, "No resources found in %s namespace.\n", ns)
		}
	} else if err := p.print(a.Out, items, a.Now(), true); err != nil {
		return err
	}
	if !o.watch {
		return nil
	}
	if c.WatchTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.WatchTimeout)
		defer cancel()
	}
	rv := list.ResourceVersion
	relist := func(ctx context.Context) (string, bool, error) {
		if rv != "" {
			v := rv
			rv = ""
			return v, false, nil
		}
		// A watch too old to resume: list again, and print what is there.
		l, err := listElastiServices(ctx, c, ns, "")
		if err != nil {
			return "", false, err
		}
		l.Items = slices.DeleteFunc(l.Items, func(es elastiv1alpha1.ElastiService) bool { return len(names) > 0 && !slices.Contains(names, es.Name) })
		if err := p.print(a.Out, l.Items, a.Now(), false); err != nil {
			return "", false, err
		}
		return l.ResourceVersion, false, nil
	}
	err = followElastiServices(ctx, c, ns, "", relist, func(_ watch.EventType, es *elastiv1alpha1.ElastiService) (bool, error) {
		if len(names) > 0 && !slices.Contains(names, es.Name) {
			return false, nil
		}
		return false, p.print(a.Out, []elastiv1alpha1.ElastiService{*es}, a.Now(), false)
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Interrupted: what kubectl get --watch does too.
		return nil
	}
	return err
}

// statusPrinter prints ElastiServices as -o says.
type statusPrinter struct {
	format     string
	namespaces bool
	// printer prints a SummaryList or a Summary: the formats not the
	// plugin's own.
	printer printers.ResourcePrinter
	// headed: the table's header is out.
	headed bool
	// tw aligns the rows a watch adds with those before, as kubectl's
	// (it remembers the columns' widths).
	tw *tabwriter.Writer
	// waking reads how far a waking ElastiService's pods are.
	waking func(*elastiv1alpha1.ElastiService) *Waking
}

func newStatusPrinter(o statusOptions) (*statusPrinter, error) {
	p := &statusPrinter{format: *o.print.OutputFormat, namespaces: o.all}
	var err error
	switch {
	case p.format == OutputTable && o.print.TemplatePrinterFlags.TemplateArgument != nil && *o.print.TemplatePrinterFlags.TemplateArgument != "":
		p.printer, err = o.print.ToPrinter()
	case p.format == OutputTable, p.format == OutputWide:
	case p.format == OutputName:
		p.printer, err = o.print.ToPrinter()
	case strings.HasPrefix(p.format, "custom-columns="):
		p.printer, err = newCustomColumnsPrinter(strings.TrimPrefix(p.format, "custom-columns="))
	default:
		p.printer, err = o.print.ToPrinter()
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return nil, usageError{fmt.Sprintf("unknown output format %q: use json, yaml or wide, or name, jsonpath=TEMPLATE, custom-columns=SPEC or go-template=TEMPLATE", p.format)}
		}
	}
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return p, nil
}

// writer is p's tabwriter onto w.
func (p *statusPrinter) writer(w io.Writer) *tabwriter.Writer {
	if p.tw == nil {
		p.tw = printers.GetNewTabWriter(w)
	}
	return p.tw
}

// table is whether p prints the plugin's table.
func (p *statusPrinter) table() bool { return p.printer == nil }

// print prints items at now: as a List in -o json or yaml when list (the
// command's list; a watch's changes come one by one, as kubectl's), and
// in a table under the header the first time.
func (p *statusPrinter) print(w io.Writer, items []elastiv1alpha1.ElastiService, now time.Time, list bool) error {
	if p.format == OutputName {
		for i := range items {
			es := items[i].DeepCopy()
			es.SetGroupVersionKind(elastiv1alpha1.SchemeGroupVersion.WithKind("ElastiService"))
			if err := p.printer.PrintObj(es, w); err != nil {
				return err
			}
		}
		return nil
	}
	summaries := make([]Summary, 0, len(items))
	for i := range items {
		s := Summarize(&items[i], now)
		if p.waking != nil {
			s.Waking = p.waking(&items[i])
		}
		summaries = append(summaries, s)
	}
	if p.table() {
		if len(summaries) == 0 {
			return nil
		}
		printTable(p.writer(w), summaries, p.namespaces, p.format == OutputWide, !p.headed, now)
		p.headed = true
		return p.tw.Flush()
	}
	if columns, ok := p.printer.(*customColumnsPrinter); ok {
		if err := columns.print(p.writer(w), summaries, !p.headed); err != nil {
			return err
		}
		p.headed = p.headed || len(summaries) > 0
		return p.tw.Flush()
	}
	if list {
		return p.printer.PrintObj(NewSummaryList(summaries), w)
	}
	// After the list, a watch prints each object by itself, as kubectl's.
	for i := range summaries {
		if err := p.printer.PrintObj(&summaries[i], w); err != nil {
			return err
		}
	}
	return nil
}

// PrintTable writes summaries as kubectl prints a table: a NAMESPACE
// column with -A, more columns with -o wide.
func PrintTable(w io.Writer, summaries []Summary, namespaces, wide bool, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	printTable(tw, summaries, namespaces, wide, true, now)
	return tw.Flush()
}

// printTable is PrintTable, with the header row or without.
// It does not flush tw.
func printTable(tw io.Writer, summaries []Summary, namespaces, wide, header bool, now time.Time) {
	head := "NAME\tMODE\tREPLICAS\tLAST WAKE\tREADY AFTER P50\tLAST HELD\tTIME ASLEEP\tWAKING"
	if namespaces {
		head = "NAMESPACE\t" + head
	}
	if wide {
		head += "\tWAKES\tLAST READY AFTER\tREADY\tSERVICE\tTARGET"
	}
	if header {
		fmt.Fprintln(tw, head)
	}
	for _, s := range summaries {
		replicas := none
		if s.Mode != "" {
			replicas = strconv.Itoa(int(s.TargetReplicas))
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.Name, orNone(s.Mode), replicas, ago(s.LastWake, now), coldStart(s.ColdStartP50),
			coldStart(s.LastHeld), age(s.TimeAsleep), waking(s.Waking, now))
		if namespaces {
			row = s.Namespace + "\t" + row
		}
		if wide {
			row += fmt.Sprintf("\t%d\t%s\t%s\t%s\t%s", s.Wakes, coldStart(s.LastColdStart), orNone(s.Ready), s.Service, s.Target)
		}
		fmt.Fprintln(tw, row)
	}
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
