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

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
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
