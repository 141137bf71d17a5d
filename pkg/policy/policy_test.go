package policy

import "testing"

func TestFirstVerdictWins(t *testing.T) {
	pass := func(int) *string { return nil }
	says := func(s string) func(int) *string { return func(int) *string { return &s } }
	cases := []struct {
		name  string
		chain Chain[int, string]
		want  string // "" for no verdict
	}{
		{"empty", nil, ""},
		{"all pass", Chain[int, string]{pass, pass}, ""},
		{"first verdict", Chain[int, string]{pass, says("a"), says("b")}, "a"},
	}
	for _, c := range cases {
		got := c.chain.First(0)
		if (got == nil) != (c.want == "") || got != nil && *got != c.want {
			t.Errorf("%s: First = %v, want %q", c.name, got, c.want)
		}
	}
}
