package endpointready

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestServing(t *testing.T) {
	for _, tc := range []struct {
		ready, terminating *bool
		want               bool
	}{
		{nil, nil, true},
		{ptr.To(true), nil, true},
		{ptr.To(false), nil, false},
		{ptr.To(true), ptr.To(true), false},
		{nil, ptr.To(false), true},
	} {
		ep := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: tc.ready, Terminating: tc.terminating}}
		if got := Serving(ep); got != tc.want {
			t.Errorf("ready=%v terminating=%v: %v, want %v", ptr.Deref(tc.ready, true), ptr.Deref(tc.terminating, false), got, tc.want)
		}
	}
}
