// Package oci assembles elasti's container images without Docker: an OCI
// image index per command (linux/amd64 and linux/arm64) on an empty base,
// from binaries `make images` has already built with the Makefile's
// GO_BUILD_ENV and GO_BUILD_FLAGS. It is a build tool (hack/images), never
// linked into elasti's binaries.
//
// The constants here are the one place that says what an image is
// (entrypoint, user, labels, where the binary lives); test/release's tests
// hold the Dockerfile to them.
//
// Every byte is a function of the binaries, Meta and the pinned modules, so
// two builds of one commit give one digest: tar entries in a fixed order
// with fixed owners, modes and mtimes, gzip without a timestamp, config and
// history times from Meta.Created (the commit time), no build host names.
package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

const (
	// Repository is where elasti's images live: manifests/ runs
	// Repository/elasti-operator:VERSION and Repository/elasti-resolver:VERSION.
	Repository = "ghcr.io/elasti-dev"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/elasti-dev/elasti"

	// Binary is where the command lives in its image, and Entrypoint runs it.
	Binary = "/app"
	// UID and GID are distroless's nonroot user, which the manifests'
	// runAsUser and runAsGroup name.
	UID = 65532
	GID = 65532
	// User is the image config's user: numeric, so runAsNonRoot can check it
	// without reading /etc/passwd.
	User = "65532:65532"

	// CABundle is the first file Go's crypto/x509 reads for roots on Linux
	// (Debian's path, also distroless's).
	CABundle = "/etc/ssl/certs/ca-certificates.crt"

	LabelSource   = "org.opencontainers.image.source"
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
)

// Commands are the images built, one per ./cmd/<name>.
var Commands = []string{"elasti-operator", "elasti-resolver"}

// Platforms are the platforms of every image index, in index order.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// Entrypoint is the image config's entrypoint (a copy each call).
func Entrypoint() []string { return []string{Binary} }

// Meta is what an image says about its source.
type Meta struct {
	// Version is the Makefile's VERSION, the tag.
	Version string
	// Revision is the git commit built.
	Revision string
	// Created is the commit time (SOURCE_DATE_EPOCH), never the build's.
	Created time.Time
}

// Labels are the image config's labels for command cmd; the index and
// manifests carry the same as annotations.
func Labels(cmd string, m Meta) map[string]string {
	return map[string]string{
		LabelSource:   Source,
		LabelTitle:    cmd,
		LabelVersion:  m.Version,
		LabelRevision: m.Revision,
		LabelCreated:  m.Created.UTC().Format(time.RFC3339),
	}
}

// Reference is the image reference manifests/ runs for cmd at version,
// under repo (Repository for a release).
func Reference(repo, cmd, version string) string {
	return repo + "/" + cmd + ":" + version
}

// PlatformDir is the directory under bin/ that holds p's binaries, as `go
// install` names it: linux_amd64.
func PlatformDir(p v1.Platform) string { return p.OS + "_" + p.Architecture }

// epoch is every file's mtime. Not the commit time: the base layer then
// stays byte-identical across releases, so registries and nodes store it once.
var epoch = time.Unix(0, 0).UTC()

// entry is one file or directory of a layer.
type entry struct {
	name     string // without a leading slash
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// gzipLayer writes entries, sorted by name so parents come first, as a
// gzipped tar layer.
func gzipLayer(entries []entry) (v1.Layer, error) {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	// Compressed once, here: the library would otherwise gzip again for
	// every digest and write. A zero gzip.Header has no mtime or name.
	var zipped bytes.Buffer
	zw, err := gzip.NewWriterLevel(&zipped, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarred.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := zipped.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// Go's resolver reads the hosts order from here; Kubernetes mounts
// /etc/hosts and /etc/resolv.conf.
const nsswitch = "hosts: files dns\n"

// CACertificates returns the PEM bundle the images carry at CABundle.
//
// The roots are Go's, from golang.org/x/crypto/x509roots/fallback (Mozilla's
// set, as Go publishes it), not the build host's Debian ca-certificates:
// that module is pinned by go.sum, so every machine writes the same bytes
// and a release is reproducible anywhere, and `make images` needs no
// package installed. They are written as a file, not linked into the
// binaries with `import _ ".../fallback"`, so the binary in an image is
// byte for byte the one `make build` and the Dockerfile build, and a user
// with a private CA replaces the file (a mount, or SSL_CERT_FILE) as on any
// distroless image. A PEM file cannot carry a root's distrust-after date, so
// the roots the module constrains are left out rather than trusted without
// their constraint.
func CACertificates() []byte {
	var out bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return out.Bytes()
}

// baseEntries are the files every image has under its binary: the users,
// the CA roots, a world-writable /tmp and nonroot's home, like distroless's
// static:nonroot. There is no time zone database: the operator embeds Go's
// (time/tzdata) for enabledPeriod.timeZone, so every replica reads a zone
// the same, and without /etc/localtime Go's local time is UTC.
func baseEntries() []entry {
	return []entry{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: path.Join("etc/ssl/certs", path.Base(CABundle)), mode: 0o644, data: CACertificates()},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, uid: UID, gid: GID, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// Image assembles cmd's image for platform p from the binary at bin.
func Image(cmd string, p v1.Platform, bin string, m Meta) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	base, err := gzipLayer(baseEntries())
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	// Owned by root and not writable by nonroot.
	app, err := gzipLayer([]entry{{name: Binary[1:], mode: 0o755, data: data}})
	if err != nil {
		return nil, fmt.Errorf("%s layer: %w", cmd, err)
	}
	created := v1.Time{Time: m.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "elasti hack/images: users, CA roots, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "elasti hack/images: " + Binary + " from ./cmd/" + cmd}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: Entrypoint(),
		User:       User,
		Labels:     Labels(cmd, m),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, Labels(cmd, m)).(v1.Image), nil
}

// Index assembles cmd's image index from bins, the binary for each of
// Platforms, in that order.
func Index(cmd string, bins map[string]string, m Meta) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		bin, ok := bins[p.String()]
		if !ok {
			return nil, fmt.Errorf("%s: no binary for %s", cmd, p)
		}
		img, err := Image(cmd, p, bin, m)
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %w", cmd, p, err)
		}
		desc := v1.Descriptor{Platform: &p}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: desc})
	}
	return mutate.Annotations(idx, Labels(cmd, m)).(v1.ImageIndex), nil
}

// plainImage is an image whose index entry has no artifactType: the library
// would otherwise copy the config media type there, a field the OCI spec
// keeps for artifacts, not images.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }
