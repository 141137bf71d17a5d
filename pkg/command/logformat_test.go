package command

import (
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func parseLogFormat(t *testing.T, args ...string) error {
	t.Helper()
	bind := WithKlog("test", "tests", func(*flag.FlagSet, func(string) string) (struct{}, func() error) {
		return struct{}{}, func() error { return nil }
	})
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	_, err := Parse(fs, bind, func(string) string { return "" }, args)
	return err
}

// --log-format=json writes each klog call as one JSON object, with -v
// still deciding which V(n) calls are written; text leaves klog as it is,
// and any other format is refused.
func TestLogFormatJSON(t *testing.T) {
	var out bytes.Buffer
	logOutput = &out
	t.Cleanup(func() {
		klog.ClearLogger()
		_ = parseLogFormat(t, "-v=0")
	})
	if err := parseLogFormat(t, "--log-format=json", "-v=2"); err != nil {
		t.Fatal(err)
	}
	klog.Background().Info("hello", "key", "value")
	klog.Background().V(2).Info("verbose")
	klog.Background().V(3).Info("too verbose")
	klog.Flush()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want hello and verbose:\n%s", len(lines), out.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if first["msg"] != "hello" || first["key"] != "value" {
		t.Errorf("first line %v, want msg hello and key value", first)
	}
	if !strings.Contains(lines[1], `"msg":"verbose"`) {
		t.Errorf("second line %q, want the V(2) message", lines[1])
	}
}

func TestLogFormatRefusesUnknown(t *testing.T) {
	for _, f := range []string{"JSON", "logfmt", ""} {
		err := parseLogFormat(t, "--log-format="+f)
		if err == nil || !strings.Contains(err.Error(), "--log-format") {
			t.Errorf("--log-format=%q: err %v, want a refusal naming the flag", f, err)
		}
	}
	if err := parseLogFormat(t, "--log-format=text"); err != nil {
		t.Errorf("--log-format=text: %v", err)
	}
}
