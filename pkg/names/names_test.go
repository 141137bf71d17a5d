package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestKubeElastiCompatibleNames(t *testing.T) {
	// The hash is the first 10 hex digits of sha256 of the public Service
	// name, computed independently: echo -n target-service | sha256sum.
	if got, want := PrivateService("target-service"), "elasti-target-service-pvt-b7f26a24b2"; got != want {
		t.Errorf("PrivateService = %q, want %q", got, want)
	}
	if got, want := ResolverSlice("target-service"), "elasti-target-service-endpointslice-to-resolver-b7f26a24b2"; got != want {
		t.Errorf("ResolverSlice = %q, want %q", got, want)
	}
}

func TestCutNameMatchesKubeElasti(t *testing.T) {
	// 7 + 41 + 5 + 10 = 63: a Service name keeps 41 characters of the public
	// name, then trailing '-' are trimmed.
	svc := strings.Repeat("a", 40) + "-bcdef"
	got := PrivateService(svc)
	if want := "elasti-" + strings.Repeat("a", 40) + "-pvt-"; got[:len(want)] != want {
		t.Errorf("PrivateService(%q) = %q, want prefix %q", svc, got, want)
	}
}

func TestLongNamesFitAndStayDistinct(t *testing.T) {
	long := strings.Repeat("abcdefghi-", 7) // 70 chars, a cut lands after a '-'
	other := long + "x"
	for _, svc := range []string{long, other, strings.Repeat("z", 63)} {
		pvt := PrivateService(svc)
		if len(pvt) > 63 {
			t.Errorf("PrivateService(%d chars) is %d chars", len(svc), len(pvt))
		}
		if errs := validation.IsDNS1035Label(pvt); len(errs) > 0 {
			t.Errorf("PrivateService %q is not a valid Service name: %v", pvt, errs)
		}
		if strings.Contains(pvt, "--") {
			t.Errorf("PrivateService %q kept a trailing '-' from the cut", pvt)
		}
		if errs := validation.IsDNS1123Subdomain(ResolverSlice(svc)); len(errs) > 0 {
			t.Errorf("ResolverSlice %q is invalid: %v", ResolverSlice(svc), errs)
		}
	}
	if PrivateService(long) == PrivateService(other) {
		t.Error("two long names that share the cut prefix collide")
	}
}
