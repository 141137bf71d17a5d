package kubectlelasti

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Tenant safety (issue 38, hole 4): nothing a namespace's users write
// reaches an admin's terminal as a control sequence.
func TestTerminalWriterShowsControlsInsteadOfSendingThem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain, tab\tand newline\n", "plain, tab\tand newline\n"},
		{"clear \x1b[2J screen", "clear ^[[2J screen"},
		{"title \x1b]0;pwned\x07", "title ^[]0;pwned^G"},
		{"over\rwrite", `over\rwrite`},
		{"back\x08\x08space", "back^H^Hspace"},
		{"nul\x00 del\x7f", "nul^@ del^?"},
		{"8-bit CSI \x9b2J", `8-bit CSI \x9b2J`},
		{"UTF-8 CSI \u009b2J and NEL \u0085", `UTF-8 CSI \u009b2J and NEL \u0085`},
		{"é, 日本, emoji 🙂 and U+00A0\u00a0", "é, 日本, emoji 🙂 and U+00A0\u00a0"},
		{"a cut \xe6\x97", `a cut \xe6\x97`},
	} {
		var b bytes.Buffer
		w := newTerminalWriter(&b)
		// One byte at a time, so every sequence is cut across writes.
		for i := range len(c.in) {
			if n, err := w.Write([]byte{c.in[i]}); n != 1 || err != nil {
				t.Fatalf("%q: Write = %d, %v", c.in, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%q: wrote %q, want %q", c.in, b.String(), c.want)
		}
	}
}

// Every command prints through it: a trigger query and a condition
// message with escape sequences, shown by status -o wide, explain and the
// custom columns, reach the terminal with no control byte but tab and
// newline.
func TestCommandsPrintNoControlSequences(t *testing.T) {
	const attack = "\x1b]0;owned\x07\x1b[2J\r\x9b1m\u009b"
	es := elastiService("shop", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers[0].Metadata = []byte(`{"query":"up` + jsonEscape(attack) + `","threshold":"1"}`)
		es.Status.Conditions = append(es.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionTriggersEvaluated,
			Status: metav1.ConditionFalse, Reason: "QueryFailed", Message: "bad query " + attack, LastTransitionTime: *at(time.Minute)})
	})
	f := newFixture(t, es)
	f.replicas["web"] = 2
	for _, args := range [][]string{
		{"status", "-o", "wide"},
		{"status", "-o", "custom-columns=NAME:.name,WHY:.message"},
		{"explain", "web"},
	} {
		f.run(args...)
		for name, s := range map[string]string{"stdout": f.out.String(), "stderr": f.err.String()} {
			for i := 0; i < len(s); {
				r, size := utf8.DecodeRuneInString(s[i:])
				if (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f) || (r == utf8.RuneError && size == 1) {
					t.Errorf("%q: %s carries control %U at %d:\n%q", args, name, r, i, s)
					break
				}
				i += size
			}
		}
	}
	f.run("explain", "web")
	if !strings.Contains(f.out.String(), "^[]0;owned^G") {
		t.Errorf("explain does not show the escaped message:\n%s", f.out.String())
	}
}

// jsonEscape is s as a JSON string's contents.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
