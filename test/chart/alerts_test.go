package chart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/test/localcluster"
)

const (
	alertsDoc          = "docs/operations/alerts.md"
	prometheusRuleKey  = "PrometheusRule elasti/elasti"
	prometheusRuleFile = "prometheus-rule-values.yaml"
)

// The chart's alerts, each with a section of docs/operations/alerts.md.
var alertNames = []string{
	"ElastiResolverUnavailable",
	"ElastiWakesFailing",
	"ElastiColdStartSlow",
	"ElastiTriggerErrors",
	"ElastiServicesNotReady",
}

// ruleGroups is the rendered PrometheusRule's spec: a Prometheus rule file.
func ruleGroups(t *testing.T, args ...string) []byte {
	t.Helper()
	rule := get(t, render(t, args...), prometheusRuleKey)
	out, err := yaml.Marshal(rule["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func alertRules(t *testing.T, groups []byte) []alertRule {
	t.Helper()
	var spec struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(groups, &spec); err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	for _, g := range spec.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestPrometheusRuleIsOptIn: no PrometheusRule unless prometheusRule.enabled.
func TestPrometheusRuleIsOptIn(t *testing.T) {
	if _, ok := render(t, "--set", "global.enableMonitoring=true")[prometheusRuleKey]; ok {
		t.Errorf("the chart renders %s with prometheusRule.enabled false", prometheusRuleKey)
	}
}

// TestPrometheusRuleAlerts: with the alerts on, the rule holds the five
// alerts; each reads metrics elasti exports, carries the values'
// thresholds and durations, and links to its own runbook section, which
// says what the alert means, how to check and what to do.
func TestPrometheusRuleAlerts(t *testing.T) {
	rules := alertRules(t, ruleGroups(t, "-f", repo(t, "charts", "elasti", "ci", prometheusRuleFile),
		"--set", "prometheusRule.runbookBaseURL=https://docs.example.com/elasti/alerts/"))
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
	}
	if !slices.Equal(names, alertNames) {
		t.Fatalf("alerts %v, want %v", names, alertNames)
	}
	exported := exportedMetrics(t)
	sections := runbookSections(t)
	for _, r := range rules {
		want := "https://docs.example.com/elasti/alerts#" + strings.ToLower(r.Alert)
		if got := r.Annotations["runbook_url"]; got != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
		}
		body, ok := sections[strings.ToLower(r.Alert)]
		if !ok {
			t.Errorf("%s: %s has no section %q", r.Alert, alertsDoc, r.Alert)
		}
		for _, part := range []string{"What it means", "How to check", "What to do"} {
			if !strings.Contains(body, part) {
				t.Errorf("%s: its runbook section lacks %q", r.Alert, part)
			}
		}
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a severity, a summary and a description: %+v", r.Alert, r)
		}
		for _, m := range regexp.MustCompile(`\belasti_[a-z_]+`).FindAllString(r.Expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count")
			if !exported[base] {
				t.Errorf("%s reads %s, which neither the operator nor the resolver exports", r.Alert, m)
			}
		}
		if !strings.Contains(r.Expr, `namespace="elasti"`) {
			t.Errorf("%s: %q is not scoped to the release's namespace", r.Alert, r.Expr)
		}
	}
	byName := map[string]alertRule{}
	for _, r := range rules {
		byName[r.Alert] = r
	}
	want(t, "cold-start threshold", strings.HasSuffix(byName["ElastiColdStartSlow"].Expr, "> 20"), true)
	want(t, "not-ready for", byName["ElastiServicesNotReady"].For, "10m")
	want(t, "resolver-unavailable for", byName["ElastiResolverUnavailable"].For, "5m")
}

// exportedMetrics are the metric names registered in pkg/ (a Name: "..."
// of a metric options struct or a NewDesc).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"(elasti_[a-z_]+)"`)
	err := filepath.WalkDir(repo(t, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// runbookSections maps the GitHub anchor of each "## " heading of
// docs/operations/alerts.md to the section's text.
func runbookSections(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile(repo(t, alertsDoc))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var cur string
	for _, line := range strings.Split(string(src), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = anchor(h)
			sections[cur] = ""
			continue
		}
		if cur != "" {
			sections[cur] += line + "\n"
		}
	}
	return sections
}

// anchor is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestPrometheusRuleLoadsInPrometheus: the rendered rule's groups, as a
// rule file, load in the bed's Prometheus (the rule-file parser promtool
// check rules runs) and every alert evaluates without error; a rule file
// with a broken expression, run the same way, is refused, so the check can
// fail.
func TestPrometheusRuleLoadsInPrometheus(t *testing.T) {
	groups := ruleGroups(t, "-f", repo(t, "charts", "elasti", "ci", prometheusRuleFile))
	rules := runPrometheus(t, groups)
	if len(rules) != len(alertNames) {
		t.Fatalf("Prometheus loaded %d rules, want %d: %v", len(rules), len(alertNames), rules)
	}
	for _, name := range alertNames {
		if h, ok := rules[name]; !ok || h != "ok" {
			t.Errorf("Prometheus: %s health %q (loaded %v), want ok", name, h, ok)
		}
	}

	broken := bytes.Replace(groups, []byte("histogram_quantile(0.99,"), []byte("histogram_quantile(0.99,,"), 1)
	if bytes.Equal(broken, groups) {
		t.Fatal("the broken rule file is the same as the rendered one")
	}
	out, err := prometheusExits(t, broken)
	if err == nil {
		t.Fatalf("Prometheus started with a broken rule file:\n%s", out)
	}
	if !strings.Contains(out, "rules.yaml") {
		t.Errorf("Prometheus refused the broken rule file without naming it:\n%s", out)
	}
}

// writePrometheusConfig writes a configuration that loads groups as its
// only rule file and evaluates it every second, with no scrape targets.
func writePrometheusConfig(t *testing.T, groups []byte) (config, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), groups, 0o600); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "prometheus.yml")
	cfg := "global:\n  evaluation_interval: 1s\nrule_files:\n  - " + filepath.Join(dir, "rules.yaml") + "\n"
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, dir
}

func prometheusCmd(ctx context.Context, t *testing.T, config, dir, listen string) *exec.Cmd {
	t.Helper()
	return exec.CommandContext(ctx, filepath.Join(bins(t), localcluster.PrometheusBinary),
		"--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
}

// freeLoopbackAddr is a 127.0.0.1 address no one listened on a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// runPrometheus runs Prometheus on groups until every rule has been
// evaluated once, and returns each rule's health by name.
func runPrometheus(t *testing.T, groups []byte) map[string]string {
	t.Helper()
	config, dir := writePrometheusConfig(t, groups)
	addr := freeLoopbackAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs bytes.Buffer
	cmd := prometheusCmd(ctx, t, config, dir, addr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
	}()
	client := &http.Client{Timeout: 5 * time.Second}
	var last string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("Prometheus exited (%v) with the rendered rules:\n%s", err, logs.String())
		default:
		}
		health, done, err := ruleHealth(client, "http://"+addr+"/api/v1/rules")
		if err != nil {
			last = err.Error()
			continue
		}
		if done {
			return health
		}
		last = fmt.Sprint(health)
	}
	t.Fatalf("Prometheus did not evaluate the rules within 90s (last: %s):\n%s", last, logs.String())
	return nil
}

// ruleHealth reads /api/v1/rules: each rule's health, and whether every
// rule has been evaluated (none is still "unknown").
func ruleHealth(client *http.Client, url string) (map[string]string, bool, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, false, err
	}
	health := map[string]string{}
	done := len(body.Data.Groups) > 0
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			health[r.Name] = r.Health
			if r.LastError != "" {
				health[r.Name] += ": " + r.LastError
			}
			if r.Health == "unknown" {
				done = false
			}
		}
	}
	return health, done, nil
}

// prometheusExits runs Prometheus on groups and returns its output and
// exit error, failing the test if it is still running after 60s.
func prometheusExits(t *testing.T, groups []byte) (string, error) {
	t.Helper()
	config, dir := writePrometheusConfig(t, groups)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := prometheusCmd(ctx, t, config, dir, freeLoopbackAddr(t)).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("Prometheus kept running with a broken rule file for 60s:\n%s", out)
	}
	return string(out), err
}
