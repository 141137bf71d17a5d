package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// -plugin writes an archive per platform, binary and licence inside, and a
// krew manifest that parses, names each archive at -plugin-url and carries
// its sha256; twice, the same bytes.
func TestPluginArchivesAndKrewManifest(t *testing.T) {
	bin := t.TempDir()
	platforms := []string{"linux/amd64", "linux/arm64", "darwin/arm64"}
	for _, p := range platforms {
		dir := filepath.Join(bin, strings.Replace(p, "/", "_", 1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pluginBinary), []byte("binary for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	license := filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(license, []byte("Apache License"), 0o644); err != nil {
		t.Fatal(err)
	}
	var outs [2]string
	for i := range outs {
		outs[i] = t.TempDir()
		var stdout bytes.Buffer
		err := run(t.Context(), []string{"-plugin", "-version", "v9.8.7", "-source-date-epoch", "1700000000", "-bin", bin,
			"-plugin-platforms", strings.Join(platforms, ","), "-plugin-url", "https://example.invalid/releases/v9.8.7/",
			"-license", license, "-chart-out", outs[i]}, &stdout)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), "krew manifest: "+filepath.Join(outs[i], pluginManifest)) {
			t.Errorf("stdout:\n%s", stdout.String())
		}
	}
	if a, b := tree(t, outs[0]), tree(t, outs[1]); !maps.Equal(a, b) {
		t.Errorf("two runs differ: %q and %q", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}

	raw, err := os.ReadFile(filepath.Join(outs[0], pluginManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m krewPlugin
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "elasti" ||
		m.Spec.Version != "v9.8.7" || m.Spec.ShortDescription == "" || len(m.Spec.ShortDescription) > 50 || len(m.Spec.Platforms) != len(platforms) {
		t.Fatalf("manifest:\n%s", raw)
	}
	for i, p := range m.Spec.Platforms {
		goos, arch, _ := strings.Cut(platforms[i], "/")
		name := "kubectl-elasti_v9.8.7_" + goos + "_" + arch + ".tar.gz"
		if !maps.Equal(p.Selector.MatchLabels, map[string]string{"os": goos, "arch": arch}) ||
			p.URI != "https://example.invalid/releases/v9.8.7/"+name || p.Bin != "kubectl-elasti" {
			t.Errorf("platform %d: %+v", i, p)
		}
		archive, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(archive); p.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest sha256 %s, the archive's %x", name, p.SHA256, sum)
		}
		files := untar(t, archive)
		if !maps.Equal(files, map[string]string{"kubectl-elasti": "binary for " + platforms[i], "LICENSE": "Apache License"}) {
			t.Errorf("%s holds %q", name, files)
		}
		var from []string
		for _, f := range p.Files {
			from = append(from, f.From)
			if _, ok := files[f.From]; !ok || f.To != "." {
				t.Errorf("%s: manifest file %+v not in the archive", name, f)
			}
		}
		if len(from) != len(files) {
			t.Errorf("%s: manifest files %q, archive %d files", name, from, len(files))
		}
	}

	// A platform not built is an error, not a manifest without it.
	err = run(t.Context(), []string{"-plugin", "-version", "v9.8.7", "-source-date-epoch", "1", "-bin", bin,
		"-plugin-platforms", "windows/amd64", "-plugin-url", "https://example.invalid", "-chart-out", t.TempDir()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("windows_amd64", "kubectl-elasti")) {
		t.Errorf("a missing binary: %v", err)
	}
	err = run(t.Context(), []string{"-plugin", "-version", "v9.8.7", "-source-date-epoch", "1", "-bin", bin, "-chart-out", t.TempDir()}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-plugin-url is required") {
		t.Errorf("no -plugin-url: %v", err)
	}
}

// untar maps an archive's files to their contents, checking the binary is
// executable and every file owned by root at a fixed time.
func untar(t *testing.T, archive []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(b)
		if (h.Name == "kubectl-elasti") != (h.Mode == 0o755) || h.Uid != 0 || h.ModTime.Unix() != 1700000000 {
			t.Errorf("%s: mode %o uid %d mtime %v", h.Name, h.Mode, h.Uid, h.ModTime)
		}
	}
}
