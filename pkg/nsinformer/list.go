package nsinformer

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxNamespaces bounds a --watch-namespace list: every namespace costs the
// operator one watch per resource type (seven) on the apiserver.
const MaxNamespaces = 100

// ParseList reads --watch-namespace, the operator's and the resolver's:
// empty is every namespace (nil), otherwise a comma-separated list.
func ParseList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, ns := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(ns))
	}
	return out
}

// ValidateList refuses empty, malformed and repeated names, and more than
// MaxNamespaces.
func ValidateList(namespaces []string) error {
	if len(namespaces) > MaxNamespaces {
		return fmt.Errorf("--watch-namespace names %d namespaces; at most %d", len(namespaces), MaxNamespaces)
	}
	for i, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("--watch-namespace: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if slices.Contains(namespaces[:i], ns) {
			return fmt.Errorf("--watch-namespace names %q twice", ns)
		}
	}
	return nil
}
