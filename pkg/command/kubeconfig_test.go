package command

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	helperEnv     = "ELASTI_TEST_RESTCONFIG_HELPER"
	helperFlagEnv = "ELASTI_TEST_RESTCONFIG_FLAG"
	resultPrefix  = "RESTCONFIG RESULT: "
)

// TestRestConfigHelperProcess is not a test: TestRestConfigLoadingRules runs
// the test binary again with only this test and its own environment, since
// client-go reads HOME once, when it is initialised.
func TestRestConfigHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestRestConfigLoadingRules")
	}
	cfg, err := RestConfig(os.Getenv(helperFlagEnv))
	if err != nil {
		fmt.Println(resultPrefix + "error: " + err.Error())
		return
	}
	fmt.Println(resultPrefix + "server: " + cfg.Host)
}

func writeKubeconfig(t *testing.T, path, server string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
contexts:
- name: c
  context:
    cluster: c
    user: u
users:
- name: u
  user:
    token: t
current-context: c
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// restConfigIn runs RestConfig in a fresh process with HOME set to home,
// KUBECONFIG to kubeconfigEnv when not empty, the flag value flag, and no
// in-cluster environment; it returns "server: URL" or "error: message".
func restConfigIn(t *testing.T, home, kubeconfigEnv, flag string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestConfigHelperProcess$", "-test.count=1")
	cmd.Env = []string{"HOME=" + home, helperEnv + "=1", helperFlagEnv + "=" + flag}
	if kubeconfigEnv != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfigEnv)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if result, ok := strings.CutPrefix(line, resultPrefix); ok {
			return strings.TrimSpace(result)
		}
	}
	t.Fatalf("helper process printed no result:\n%s", out)
	return ""
}

// Both binaries find their cluster as kubectl does: --kubeconfig, else
// KUBECONFIG, else ~/.kube/config (else in-cluster, which no test process
// here has).
func TestRestConfigLoadingRules(t *testing.T) {
	const (
		flagServer = "https://127.0.0.1:1001"
		envServer  = "https://127.0.0.1:1002"
		homeServer = "https://127.0.0.1:1003"
	)
	dir := t.TempDir()
	flagFile := writeKubeconfig(t, filepath.Join(dir, "flag.yaml"), flagServer)
	envFile := writeKubeconfig(t, filepath.Join(dir, "env.yaml"), envServer)
	home := filepath.Join(dir, "home")
	writeKubeconfig(t, filepath.Join(home, ".kube", "config"), homeServer)
	emptyHome := filepath.Join(dir, "empty-home")
	if err := os.Mkdir(emptyHome, 0o700); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, home, env, flag, want string
	}{
		{"flag set", emptyHome, "", flagFile, "server: " + flagServer},
		{"only KUBECONFIG set", emptyHome, envFile, "", "server: " + envServer},
		{"only ~/.kube/config", home, "", "", "server: " + homeServer},
		{"flag beats KUBECONFIG and ~/.kube/config", home, envFile, flagFile, "server: " + flagServer},
		{"KUBECONFIG beats ~/.kube/config", home, envFile, "", "server: " + envServer},
	} {
		if got := restConfigIn(t, c.home, c.env, c.flag); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}

	// Nothing configured and not in a cluster: say how to configure it.
	got := restConfigIn(t, emptyHome, "", "")
	if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "--kubeconfig") || !strings.Contains(got, "KUBECONFIG=") {
		t.Errorf("no configuration at all: got %q, want an error naming --kubeconfig and KUBECONFIG", got)
	}
	// A --kubeconfig that does not exist is an error, not a silent fallback.
	missing := filepath.Join(dir, "missing.yaml")
	got = restConfigIn(t, home, envFile, missing)
	if !strings.HasPrefix(got, "error: ") || !strings.Contains(got, missing) || !strings.Contains(got, "--kubeconfig") {
		t.Errorf("missing --kubeconfig file: got %q, want an error naming it", got)
	}
}
