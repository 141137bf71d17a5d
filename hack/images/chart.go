package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// The values in the chart's values.yaml that name an image: the registry of
// both, and each component's repository and digest. The keys are
// KubeElasti's, so they stay where its values files put them.
var (
	registryKey = []string{"global", "image", "registry"}
	imageKeys   = map[string][]string{
		"elasti-operator": {"elastiController", "manager", "image"},
		"elasti-resolver": {"elastiResolver", "proxy", "image"},
	}
)

// pushed is one image make release pushed: where, and its index digest.
type pushed struct {
	cmd, digest string
}

// publishChart packages a copy of the chart in dir whose values run the
// images just pushed to registry, pinned by digest, and pushes it with helm
// to oci://registry, next to the images (registry/elasti:<chart version>).
// It prints the chart's reference and digest as push prints the images'.
//
// The packaged chart pins the digests (tag@digest): a chart version then
// names exact image bytes, as the chart's own digest names its templates,
// and a tag moved or overwritten in the registry later does not change
// what an install of that chart version runs. The chart in the repository
// keeps no digest, so a build from source still runs its own tag.
func publishChart(ctx context.Context, o options, registry string, images []pushed, stdout io.Writer) error {
	chart, err := readChartMeta(o.chart)
	if err != nil {
		return err
	}
	// One release is one number: make set-image-tag keeps them equal.
	if chart.AppVersion != o.meta.Version || chart.Version != strings.TrimPrefix(o.meta.Version, "v") {
		return fmt.Errorf("%s: version %s, appVersion %s; want %s and %s (make set-image-tag)", o.chart, chart.Version, chart.AppVersion, strings.TrimPrefix(o.meta.Version, "v"), o.meta.Version)
	}
	stage, err := os.MkdirTemp("", "elasti-chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	dir := filepath.Join(stage, chart.Name)
	if err := os.CopyFS(dir, os.DirFS(o.chart)); err != nil {
		return err
	}
	valuesPath := filepath.Join(dir, "values.yaml")
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	values, err = pinImages(values, registry, o.meta.Version, images)
	if err != nil {
		return fmt.Errorf("%s: %w", valuesPath, err)
	}
	if err := os.WriteFile(valuesPath, values, 0o644); err != nil {
		return err
	}

	if err := os.MkdirAll(o.chartOut, 0o755); err != nil {
		return err
	}
	if _, err := helm(ctx, o.helm, "package", dir, "--destination", o.chartOut); err != nil {
		return err
	}
	pkg := filepath.Join(o.chartOut, chart.Name+"-"+chart.Version+".tgz")
	args := []string{"push", pkg, "oci://" + registry}
	if plainHTTP(o.plainHTTP, registry) {
		args = append(args, "--plain-http")
	}
	out, err := helm(ctx, o.helm, args...)
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`(?m)^Digest: (sha256:[0-9a-f]{64})\s*$`).FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("helm push printed no digest:\n%s", out)
	}
	fmt.Fprintf(stdout, "oci://%s/%s:%s@%s  %s\n", registry, chart.Name, chart.Version, m[1], pkg)
	return nil
}

type chartMeta struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func readChartMeta(dir string) (chartMeta, error) {
	var c chartMeta
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s/Chart.yaml: %w", dir, err)
	}
	if c.Name == "" || c.Version == "" {
		return c, fmt.Errorf("%s/Chart.yaml names no chart or version", dir)
	}
	return c, nil
}

// pinImages points values.yaml at registry's images: global.image.registry
// becomes registry's host, and each repository its path and the command, so
// registry + "/" + repository is what was pushed, as for the default
// (ghcr.io + elasti-dev/elasti-operator); each tag is tag and each digest
// the pushed one, so pods show repository:tag@digest, the release and its
// pin. It edits the values in place and leaves every other byte, comments
// included, as it was.
func pinImages(values []byte, registry, tag string, images []pushed) ([]byte, error) {
	host, path, _ := strings.Cut(registry, "/")
	set := map[string]string{strings.Join(registryKey, "."): host}
	for _, img := range images {
		keys, ok := imageKeys[img.cmd]
		if !ok {
			return nil, fmt.Errorf("no image values for %s", img.cmd)
		}
		repo := img.cmd
		if path != "" {
			repo = path + "/" + img.cmd
		}
		set[strings.Join(append(keys, "repository"), ".")] = repo
		set[strings.Join(append(keys, "tag"), ".")] = tag
		set[strings.Join(append(keys, "digest"), ".")] = img.digest
	}

	var doc yaml3.Node
	if err := yaml3.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(values), "\n")
	for key, value := range set {
		n := lookup(&doc, strings.Split(key, "."))
		if n == nil || n.Kind != yaml3.ScalarNode {
			return nil, fmt.Errorf("no scalar %s", key)
		}
		// A value on one line, as values.yaml writes them: replace it
		// from its column to the end of the line, keeping a comment.
		i := n.Line - 1
		line := lines[i]
		nl := ""
		if strings.HasSuffix(line, "\n") {
			line, nl = strings.TrimSuffix(line, "\n"), "\n"
		}
		repl := line[:n.Column-1] + strconv.Quote(value)
		if n.LineComment != "" {
			repl += " " + n.LineComment
		}
		lines[i] = repl + nl
	}
	out := []byte(strings.Join(lines, ""))

	// Check the edit: every value reads back as set.
	if err := yaml3.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	for key, value := range set {
		if n := lookup(&doc, strings.Split(key, ".")); n == nil || n.Value != value {
			return nil, fmt.Errorf("%s did not become %q", key, value)
		}
	}
	return out, nil
}

// lookup finds the node at path in a document's mappings.
func lookup(n *yaml3.Node, path []string) *yaml3.Node {
	if n.Kind == yaml3.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml3.MappingNode {
			return nil
		}
		var next *yaml3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// plainHTTP says whether to reach registry over HTTP: always with -plain-http
// true, never with false, and by default only for a registry on loopback,
// which has no certificate to offer (the tests', or a port-forward's).
func plainHTTP(flag, registry string) bool {
	switch flag {
	case "true":
		return true
	case "false":
		return false
	}
	host, _, _ := strings.Cut(registry, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// helm runs the helm binary, returning its combined output.
func helm(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w (hack/build-cluster-bins.sh helm builds it)", bin, err)
		}
		return nil, fmt.Errorf("%s: %w\n%s", cmd, err, out.Bytes())
	}
	return out.Bytes(), nil
}
