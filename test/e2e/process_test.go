package e2e

import (
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/test/testenv"
)

// writesBy counts writes in namespace made by clients whose user agent
// starts with agent, from the apiserver's audit log.
func writesBy(t testing.TB, namespace, agent string) int {
	t.Helper()
	n := 0
	testenv.EachAuditEvent(t, func(ev testenv.AuditEvent) {
		if ev.Stage == "ResponseComplete" && ev.Verb != "watch" && ev.ObjectRef.Namespace == namespace && strings.HasPrefix(ev.UserAgent, agent+"/") {
			n++
		}
	})
	return n
}
