package v1alpha1

import (
	"fmt"
	"strings"
)

// AnnotationWaitingPage on an ElastiService turns the resolver's waiting
// page on ("true") or off ("false") for its Service, whatever the
// resolver's --waiting-page says. A browser navigation held longer than
// --waiting-page-after is then answered with a small page that reloads
// itself while the Service wakes; every other request is held as before.
// It is an annotation, not a spec field, so that the API stays
// KubeElasti's v1alpha1.
const AnnotationWaitingPage = "elasti.truefoundry.com/waiting-page"

// MaxWaitingPageValueLength bounds what a reader keeps of the annotation's
// value: the valid values are shorter, so a longer one is invalid anyway.
const MaxWaitingPageValueLength = 16

// WaitingPage reads es's AnnotationWaitingPage: set says it is present and
// valid, on is its value. "true" and "false" are valid in any case; any
// other value is an error, and counts as unset.
func WaitingPage(es *ElastiService) (on, set bool, err error) {
	v, ok := es.Annotations[AnnotationWaitingPage]
	if !ok {
		return false, false, nil
	}
	return ParseWaitingPage(v)
}

// ParseWaitingPage parses a value of AnnotationWaitingPage; see WaitingPage.
func ParseWaitingPage(v string) (on, set bool, err error) {
	switch {
	case strings.EqualFold(v, "true"):
		return true, true, nil
	case strings.EqualFold(v, "false"):
		return false, true, nil
	}
	if len(v) > MaxWaitingPageValueLength {
		v = v[:MaxWaitingPageValueLength] + "..."
	}
	return false, false, fmt.Errorf("annotation %s=%q is neither \"true\" nor \"false\"; it is ignored", AnnotationWaitingPage, v)
}
