package resolver

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/resolver/internal/resolvertest"
)

// The waiting page in a real browser: headless Chromium (Debian's
// package; make test installs it, hack/build-cluster-bins.sh) loads it
// from the resolver for a waking Service, by the Service's DNS name
// mapped to the resolver's loopback listener. It renders the stage, runs
// under the page's Content-Security-Policy with nothing refused, reloads
// itself, and a reload after the pod is Ready shows the app. The
// screenshot is kept in the test's artifact directory (go test
// -artifacts); ELASTI_SCREENSHOT_DIR keeps a copy elsewhere.

// browser runs headless Chromium on url, with the Service's name mapped
// to the resolver at addr, and returns what it printed and logged.
func browser(t *testing.T, addr string, args ...string) (stdout, stderr string) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH (make test installs it, hack/build-cluster-bins.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--metrics-recording-only",
		"--no-proxy-server", "--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
		"--host-resolver-rules=MAP " + testHost + ":80 " + addr}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// startingPod is a pod of testSvc whose app runs and is not Ready, for
// the page to show.
func startingPod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testSvc.Namespace, Name: "web-1"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-3 * time.Second))}}}}
	return p
}

func TestWaitingPageInARealBrowser(t *testing.T) {
	e, view := statusEnv(t, pageConfig(0))
	view.set(testSvc, true, startingPod())
	addr := e.srv.Listener.Addr().String()
	url := "http://" + testHost + "/shop"

	// What a person sees: the screenshot, and the page's text.
	shot := filepath.Join(t.ArtifactDir(), "waiting-page.png")
	_, logs := browser(t, addr, "--window-size=900,500", "--hide-scrollbars", "--screenshot="+shot, url)
	w, h := pngSize(t, shot)
	if w != 900 || h != 500 {
		t.Errorf("screenshot %dx%d, want 900x500", w, h)
	}
	if dir := os.Getenv("ELASTI_SCREENSHOT_DIR"); dir != "" {
		b, _ := os.ReadFile(shot)
		if err := os.WriteFile(filepath.Join(dir, "waiting-page.png"), b, 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Logf("screenshot: %s", shot)
	if strings.Contains(logs, "Content Security Policy") || strings.Contains(logs, "Refused to") {
		t.Errorf("the page broke its own Content-Security-Policy:\n%s", logs)
	}
	dom, _ := browser(t, addr, "--dump-dom", url)
	for _, want := range []string{"<title>web is starting</title>", "<h1>web is starting</h1>", "started, not ready yet for ", "usually takes about 20 s"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page as rendered lacks %q:\n%s", want, dom)
		}
	}

	// The page reloads itself; a reload once the pod is Ready gets the
	// app. Chromium's virtual time runs the page's refresh without
	// waiting for the wall clock's seconds, and stops for the network.
	pages := metricValue(t, e.r.metrics.Answer.WaitingPages)
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		deadline := time.Now().Add(30 * time.Second)
		for metricValue(t, e.r.metrics.Answer.WaitingPages) < pages+2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		view.set(testSvc, true, readyApp(t, e))
	}()
	dom, _ = browser(t, addr, "--virtual-time-budget=20000", "--dump-dom", url)
	<-ready
	if !strings.Contains(dom, "pod") || strings.Contains(dom, "is starting") {
		t.Errorf("after its reloads the browser shows %q, want the app's answer", dom)
	}
	if got := metricValue(t, e.r.metrics.Answer.WaitingPages) - pages; got < 2 {
		t.Errorf("%v pages in the reloading run, want the page reloaded at least twice", got)
	}
	resolvertest.Eventually(t, 5*time.Second, "nothing held", func() bool { return e.r.holds.Held(testSvc) == 0 })
}

// pngSize reads a PNG's width and height from its IHDR chunk.
func pngSize(t *testing.T, path string) (int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(b) < 24 || !bytes.Equal(b[:8], []byte("\x89PNG\r\n\x1a\n")) || string(b[12:16]) != "IHDR" {
		t.Fatalf("%s is no PNG (%d bytes)", path, len(b))
	}
	return int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24]))
}
