package main

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/hack/images/oci"
)

// helmBin is the pinned helm, built or reused by hack/build-cluster-bins.sh.
func helmBin(t *testing.T) string {
	t.Helper()
	return filepath.Join(output(t, "hack/build-cluster-bins.sh", "helm"), "helm")
}

// make release's path after make images: the images and the chart pushed to
// a loopback registry. Pulled back from there, the chart is this release
// (version and appVersion are VERSION) and renders the pushed images, by
// the digests push printed.
func TestMakeReleaseChart(t *testing.T) {
	b := makeImages(t)[0]
	version := output(t, "make", "-s", "version")
	helm := helmBin(t)
	// Keep helm's registry config and cache out of the user's home.
	home := t.TempDir()
	for _, v := range []string{"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, filepath.Join(home, v))
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	dest := strings.TrimPrefix(srv.URL, "http://") + "/mirror/elasti"
	chartOut := t.TempDir()

	var out bytes.Buffer
	err := run(t.Context(), []string{"-out", filepath.Join(b.bin, "images"), "-version", version, "-push", dest,
		"-chart", filepath.Join(root, "charts", "elasti"), "-chart-out", chartOut, "-helm", helm}, &out)
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^(\S+@sha256:[0-9a-f]{64})$`).FindAllStringSubmatch(out.String(), -1)
	chartVersion := strings.TrimPrefix(version, "v")
	charts := regexp.MustCompile(`(?m)^oci://` + regexp.QuoteMeta(dest+"/elasti:"+chartVersion) + `@(sha256:[0-9a-f]{64})  (\S+)$`).FindStringSubmatch(out.String())
	if len(images) != len(oci.Commands) || charts == nil {
		t.Fatalf("release printed:\n%s", out.String())
	}
	var want []string
	for _, m := range images {
		want = append(want, m[1])
	}

	// The printed chart digest is the one in the registry, and the package
	// is where it says.
	ref, err := name.ParseReference(dest+"/elasti:"+chartVersion, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != charts[1] {
		t.Errorf("registry has %s at %s, release printed %s", desc.Digest, ref, charts[1])
	}
	if _, err := os.Stat(charts[2]); err != nil || filepath.Dir(charts[2]) != chartOut {
		t.Errorf("package %s: %v, want it in %s", charts[2], err, chartOut)
	}

	helmRun := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), helm, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
		}
		return b
	}
	chartRef := "oci://" + dest + "/elasti"
	var meta chartMeta
	if err := yaml.Unmarshal(helmRun("show", "chart", chartRef, "--version", chartVersion, "--plain-http"), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != chartVersion || meta.AppVersion != version {
		t.Errorf("pulled chart: version %s, appVersion %s; want %s and %s", meta.Version, meta.AppVersion, chartVersion, version)
	}

	rendered := helmRun("template", "elasti", chartRef, "--version", chartVersion, "--plain-http", "--namespace", "elasti")
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\s+image: "?([^"\s]+)"?$`).FindAllSubmatch(rendered, -1) {
		if img := string(m[1]); !slices.Contains(got, img) {
			got = append(got, img)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the pulled chart runs %q, want the pushed %q", got, want)
	}
}

// The release's values.yaml differs from the chart's only in the image
// values it pins; comments and every other line stay.
func TestPinImages(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(root, "charts", "elasti", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("a", 64)
	out, err := pinImages(values, "127.0.0.1:5000/mirror/elasti", "v9.8.7", []pushed{{"elasti-operator", digest}, {"elasti-resolver", digest}})
	if err != nil {
		t.Fatal(err)
	}
	before, after := strings.Split(string(values), "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("%d lines became %d", len(before), len(after))
	}
	var changed []string
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, strings.TrimSpace(after[i]))
		}
	}
	slices.Sort(changed)
	wantChanged := []string{
		`digest: "` + digest + `"`,
		`digest: "` + digest + `"`,
		`registry: "127.0.0.1:5000"`,
		`repository: "mirror/elasti/elasti-operator"`,
		`repository: "mirror/elasti/elasti-resolver"`,
		`tag: "v9.8.7"`,
		`tag: "v9.8.7"`,
	}
	if !slices.Equal(changed, wantChanged) {
		t.Errorf("changed lines:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(wantChanged, "\n"))
	}
}

func TestPlainHTTP(t *testing.T) {
	for _, c := range []struct {
		flag, registry string
		want           bool
	}{
		{"", "127.0.0.1:5000/elasti", true},
		{"", "localhost:5000", true},
		{"", "[::1]:5000/x", true},
		{"", "ghcr.io/elasti-dev", false},
		{"", "10.0.0.1:5000/x", false},
		{"true", "registry.internal:5000/x", true},
		{"false", "127.0.0.1:5000", false},
	} {
		if got := plainHTTP(c.flag, c.registry); got != c.want {
			t.Errorf("plainHTTP(%q, %q) = %v, want %v", c.flag, c.registry, got, c.want)
		}
	}
}
