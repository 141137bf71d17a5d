// Package validation refuses ElastiService specs that the CRD schema lets
// through but the operator cannot serve. The schema cannot be relied on
// alone: an older elasti CRD or KubeElasti's own may be installed, and no
// schema looks inside trigger metadata. The checks are pure, so the
// controller and tests share them.
package validation

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/regexbudget"
	"github.com/elasti-dev/elasti/pkg/schedule"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// MaxMessageBytes bounds Message: it becomes a condition message and an
// event, and a spec may hold a megabyte.
const MaxMessageBytes = 1024

// maxQuotedValue bounds how much of a bad value an error repeats.
const maxQuotedValue = 64

// ValidateElastiService returns everything wrong with es's spec that would
// keep the operator from serving it; empty means it can be reconciled.
func ValidateElastiService(es *v1alpha1.ElastiService) field.ErrorList {
	return ValidateSpec(&es.Spec, field.NewPath("spec"))
}

// ValidateSpec checks spec, found at path.
func ValidateSpec(spec *v1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Generated names, lister keys and the resolver's Host parsing all
	// take spec.service as a Service name in the ElastiService's namespace:
	// a "/", a "." or upper case would name nothing, or something else.
	errs = append(errs, validateName(path.Child("service"), spec.Service, utilvalidation.IsDNS1035Label)...)
	errs = append(errs, validateName(path.Child("scaleTargetRef", "name"), spec.ScaleTargetRef.Name, utilvalidation.IsDNS1123Subdomain)...)
	errs = append(errs, validateTriggers(spec.Triggers, path.Child("triggers"))...)
	errs = append(errs, validateProbeResponse(spec.ProbeResponse, path.Child("probeResponse"))...)
	errs = append(errs, validateEnabledPeriod(spec.EnabledPeriod, path.Child("enabledPeriod"))...)
	errs = append(errs, validateWakeWith(spec.WakeWith, spec.ScaleTargetRef, path.Child("wakeWith"))...)
	if wp := spec.WaitingPage; wp != nil {
		if _, _, err := v1alpha1.ParseWaitingPageAfter(wp.After); err != nil {
			errs = append(errs, field.Invalid(path.Child("waitingPage", "after"), shorten(wp.After), err.Error()))
		}
	}
	errs = append(errs, validateHold(spec.Hold, path.Child("hold"))...)
	return errs
}

// validateHold checks spec.hold: a timeout the resolver can parse, within
// MaxHoldTimeout, and a maxRequests within MaxHoldRequests. The
// resolver's ceilings, which the operator does not know, cap both again.
func validateHold(h *v1alpha1.Hold, path *field.Path) field.ErrorList {
	if h == nil {
		return nil
	}
	var errs field.ErrorList
	if _, _, err := v1alpha1.ParseHoldTimeout(h.Timeout); err != nil {
		errs = append(errs, field.Invalid(path.Child("timeout"), shorten(h.Timeout), err.Error()))
	}
	if !v1alpha1.ValidHoldRequests(h.MaxRequests) {
		errs = append(errs, field.Invalid(path.Child("maxRequests"), h.MaxRequests,
			fmt.Sprintf("must be between 1 and %d", v1alpha1.MaxHoldRequests)))
	}
	return errs
}

// dependencyAPIVersions maps each kind a dependency may have to its API
// version.
var dependencyAPIVersions = map[string]string{
	v1alpha1.KindDeployment:  v1alpha1.APIVersionApps,
	v1alpha1.KindStatefulSet: v1alpha1.APIVersionApps,
	v1alpha1.KindRollout:     v1alpha1.APIVersionArgoV1,
}

// validateWakeWith checks spec.wakeWith: at most MaxWakeWith workloads the
// operator can scale, each once, none of them the target itself. There is
// no namespace to check: a dependency is always in the ElastiService's own
// namespace.
func validateWakeWith(deps []v1alpha1.Dependency, target v1alpha1.ScaleTargetRef, path *field.Path) field.ErrorList {
	if len(deps) > v1alpha1.MaxWakeWith {
		return field.ErrorList{field.TooMany(path, len(deps), v1alpha1.MaxWakeWith)}
	}
	var errs field.ErrorList
	seen := map[v1alpha1.ScaleTargetRef]bool{}
	target = target.Canonical()
	for i, d := range deps {
		p := path.Index(i)
		ref := d.Ref()
		want, ok := dependencyAPIVersions[ref.Kind]
		switch {
		case !ok:
			errs = append(errs, field.NotSupported(p.Child("kind"), shorten(d.Kind),
				[]string{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindRollout}))
		case d.APIVersion != want:
			errs = append(errs, field.Invalid(p.Child("apiVersion"), shorten(d.APIVersion), fmt.Sprintf("a %s is %s", ref.Kind, want)))
		}
		errs = append(errs, validateName(p.Child("name"), d.Name, utilvalidation.IsDNS1123Subdomain)...)
		if d.Replicas < 0 {
			errs = append(errs, field.Invalid(p.Child("replicas"), d.Replicas, "must be 0 (meaning 1) or more"))
		}
		key := v1alpha1.ScaleTargetRef{Kind: ref.Kind, Name: ref.Name}
		if ref.Kind == target.Kind && ref.Name == target.Name {
			errs = append(errs, field.Invalid(p, ref.Kind+" "+shorten(ref.Name), "is the scaleTargetRef, which always wakes last"))
		} else if seen[key] {
			errs = append(errs, field.Duplicate(p, ref.Kind+" "+shorten(ref.Name)))
		}
		seen[key] = true
	}
	return errs
}

// validateEnabledPeriod checks what elasti adds to KubeElasti's
// enabledPeriod: the time zone, which only the operator's zone database can
// resolve (no schema can), and the pre-warm lead. A window in a zone the
// operator cannot read would fall back to nothing sensible, so the spec is
// refused and the user hears why. KubeElasti's schedule and duration are
// left to the poller, which reports them as before (InvalidEnabledPeriod).
func validateEnabledPeriod(ep *v1alpha1.EnabledPeriod, path *field.Path) field.ErrorList {
	if ep == nil {
		return nil
	}
	var errs field.ErrorList
	if _, err := schedule.LoadZone(ep.TimeZone); err != nil {
		errs = append(errs, field.Invalid(path.Child("timeZone"), shorten(ep.TimeZone), err.Error()))
	}
	if _, err := schedule.ParsePreWarm(ep.PreWarm); err != nil {
		errs = append(errs, field.Invalid(path.Child("preWarm"), shorten(ep.PreWarm), err.Error()))
	}
	return errs
}

// validateName requires name and checks it with check, one of
// k8s.io/apimachinery's name rules.
func validateName(path *field.Path, name string, check func(string) []string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if msgs := check(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(path, shorten(name), strings.Join(msgs, "; "))}
	}
	return nil
}

// validateTriggers checks the count first: a list past the limit is refused
// as a whole, so a thousand triggers make one error, not a thousand.
func validateTriggers(list []v1alpha1.ScaleTrigger, path *field.Path) field.ErrorList {
	if len(list) > v1alpha1.MaxTriggers {
		return field.ErrorList{field.TooMany(path, len(list), v1alpha1.MaxTriggers)}
	}
	var errs field.ErrorList
	for i, t := range list {
		if t.Type != v1alpha1.TriggerTypePrometheus {
			errs = append(errs, field.NotSupported(path.Index(i).Child("type"), shorten(t.Type), []string{v1alpha1.TriggerTypePrometheus}))
			continue
		}
		// The message names the metadata key at fault and never repeats
		// the query, a header value or a URL's password.
		if err := triggers.ValidatePrometheus(t.Metadata); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

// validateProbeResponse checks the bounds every resolver replica relies
// on (see v1alpha1.MaxProbeRules): counts first, so a list past its limit
// makes one error, then lengths, then each regular expression, charged to
// the ElastiService's budget (pkg/regexbudget, which the resolver charges
// the same way), without compiling any of them. The resolver skips what it
// cannot serve rule by rule; the operator refuses the whole spec, so the
// user hears of it.
func validateProbeResponse(rules []v1alpha1.ProbeResponseRule, path *field.Path) field.ErrorList {
	if len(rules) > v1alpha1.MaxProbeRules {
		return field.ErrorList{field.TooMany(path, len(rules), v1alpha1.MaxProbeRules)}
	}
	var errs field.ErrorList
	budget := regexbudget.ForElastiService()
	for i, r := range rules {
		rp := path.Index(i)
		errs = append(errs, maxLength(rp.Child("method"), r.Method, v1alpha1.MaxProbeMethodLength)...)
		if r.Path != nil {
			errs = append(errs, validateMatch(rp.Child("path"), r.Path.Type, r.Path.Value, budget)...)
		}
		for _, list := range []struct {
			name    string
			matches []v1alpha1.NameValueMatch
		}{{"headers", r.Headers}, {"queryParams", r.QueryParams}} {
			lp := rp.Child(list.name)
			if len(list.matches) > v1alpha1.MaxProbeMatches {
				errs = append(errs, field.TooMany(lp, len(list.matches), v1alpha1.MaxProbeMatches))
				continue
			}
			for j, m := range list.matches {
				errs = append(errs, maxLength(lp.Index(j).Child("name"), m.Name, v1alpha1.MaxProbeNameLength)...)
				errs = append(errs, validateMatch(lp.Index(j), m.Type, m.Value, budget)...)
			}
		}
		// 0 is the resolver's default, 200; an older CRD may omit it.
		if s := r.Response.Status; s != 0 && (s < v1alpha1.MinProbeStatus || s > v1alpha1.MaxProbeStatus) {
			errs = append(errs, field.Invalid(rp.Child("response", "status"), s,
				fmt.Sprintf("must be from %d to %d", v1alpha1.MinProbeStatus, v1alpha1.MaxProbeStatus)))
		}
		errs = append(errs, maxLength(rp.Child("response", "body"), r.Response.Body, v1alpha1.MaxProbeBodyLength)...)
	}
	return errs
}

// validateMatch checks a match's value: its length, and if it is a regular
// expression, that it parses and fits in what is left of budget.
func validateMatch(path *field.Path, kind, value string, budget *regexbudget.Budget) field.ErrorList {
	vp := path.Child("value")
	if errs := maxLength(vp, value, v1alpha1.MaxProbeValueLength); len(errs) > 0 {
		return errs
	}
	if kind != v1alpha1.MatchRegularExpression {
		return nil
	}
	if err := budget.Charge(value); err != nil {
		return field.ErrorList{field.Invalid(vp, shorten(value), err.Error())}
	}
	return nil
}

// maxLength refuses s past limit characters, as the CRD schema's maxLength
// counts them; the error never repeats s.
func maxLength(path *field.Path, s string, limit int) field.ErrorList {
	if utf8.RuneCountInString(s) > limit {
		return field.ErrorList{field.TooLongCharacters(path, s, limit)}
	}
	return nil
}

// shorten cuts a bad value so that an error never repeats more than
// maxQuotedValue bytes of it.
func shorten(s string) string {
	if len(s) <= maxQuotedValue {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuotedValue], "") + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// Message joins errs for a condition and an event, in at most
// MaxMessageBytes: errors that do not fit are counted, not listed.
func Message(errs field.ErrorList) string {
	const reserve = len("; and 9999 more")
	var b strings.Builder
	for i, e := range errs {
		s := e.Error()
		if i > 0 {
			s = "; " + s
		}
		if b.Len()+len(s) > MaxMessageBytes-reserve {
			if i == 0 {
				b.WriteString(strings.ToValidUTF8(s[:MaxMessageBytes-reserve], "") + "…")
				i++
			}
			if left := len(errs) - i; left > 0 {
				fmt.Fprintf(&b, "; and %d more", left)
			}
			break
		}
		b.WriteString(s)
	}
	return b.String()
}
