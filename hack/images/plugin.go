package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The kubectl plugin's release: one archive per platform and krew's
// manifest naming them (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/).
const (
	pluginBinary   = "kubectl-elasti"
	pluginName     = "elasti" // kubectl krew install elasti; kubectl elasti
	pluginManifest = "elasti.yaml"
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	pluginHomepage = "https://github.com/elasti-dev/elasti"
)

// pluginOptions are -plugin's.
type pluginOptions struct {
	bin       string   // holds <os>_<arch>/kubectl-elasti
	platforms []string // os/arch
	out       string   // where the archives and the manifest go
	url       string   // where the archives will be downloaded from
	license   string   // a file to ship next to the binary; empty: none
	version   string
	created   time.Time // every archived file's mtime
}

// krewPlugin is krew's Plugin manifest, the fields elasti's uses.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec krewSpec `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string     `json:"uri"`
	SHA256 string     `json:"sha256"`
	Files  []krewFile `json:"files"`
	Bin    string     `json:"bin"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// pluginArchiveName is the archive of the plugin for os/arch.
func pluginArchiveName(version, os, arch string) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginBinary, version, os, arch)
}

// packagePlugin writes an archive of the plugin (and the licence) for each
// platform and the krew manifest with their sha256 sums into o.out, and
// prints what it wrote. The archives are reproducible: fixed owners,
// modes and times, no gzip name or time.
func packagePlugin(o pluginOptions, stdout io.Writer) error {
	if o.url == "" {
		return errors.New("-plugin-url is required: where the archives will be downloaded from")
	}
	if len(o.platforms) == 0 {
		return errors.New("-plugin-platforms is empty")
	}
	var license []byte
	if o.license != "" {
		var err error
		if license, err = os.ReadFile(o.license); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	m := krewPlugin{APIVersion: krewAPIVersion, Kind: "Plugin"}
	m.Metadata.Name = pluginName
	m.Spec = krewSpec{
		Version:          o.version,
		Homepage:         pluginHomepage,
		ShortDescription: "Show and drive ElastiServices (scale to zero)",
		Description: `kubectl elasti lists ElastiServices (elasti, KubeElasti's API) with
their mode, replicas, last wake, cold-start p50 and time asleep; wakes a
target or has the operator put it to sleep, make-before-break; and
explains why a service is not sleeping or not waking.
`,
	}
	for _, platform := range o.platforms {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok || goos == "" || arch == "" {
			return fmt.Errorf("plugin platform %q: want os/arch", platform)
		}
		bin, err := os.ReadFile(filepath.Join(o.bin, goos+"_"+arch, pluginBinary))
		if err != nil {
			return fmt.Errorf("%w (make release builds it)", err)
		}
		files := []archived{{name: pluginBinary, mode: 0o755, data: bin}}
		if license != nil {
			files = append(files, archived{name: "LICENSE", mode: 0o644, data: license})
		}
		archive, err := tarGz(files, o.created)
		if err != nil {
			return err
		}
		name := pluginArchiveName(o.version, goos, arch)
		if err := os.WriteFile(filepath.Join(o.out, name), archive, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(archive)
		p := krewPlatform{
			URI: strings.TrimSuffix(o.url, "/") + "/" + name, SHA256: hex.EncodeToString(sum[:]), Bin: pluginBinary,
		}
		p.Selector.MatchLabels = map[string]string{"os": goos, "arch": arch}
		for _, f := range files {
			p.Files = append(p.Files, krewFile{From: f.name, To: "."})
		}
		m.Spec.Platforms = append(m.Spec.Platforms, p)
		fmt.Fprintf(stdout, "%s  %s\n", p.SHA256, filepath.Join(o.out, name))
	}
	manifest, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	path := filepath.Join(o.out, pluginManifest)
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "krew manifest: %s (kubectl krew install --manifest=%s)\n", path, path)
	return nil
}

// archived is one file of an archive.
type archived struct {
	name string
	mode int64
	data []byte
}

// tarGz is files as a gzipped tar, each owned by root and modified at
// mtime.
func tarGz(files []archived, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)),
			ModTime: mtime, Uname: "root", Gname: "root", Format: tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
