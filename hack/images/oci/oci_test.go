package oci

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

var meta = Meta{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", Created: time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)}

// fakeBinaries writes one small stand-in binary per platform under dir and
// returns them as Index wants them. The assembly never runs or parses them.
func fakeBinaries(t *testing.T, dir, cmd string) map[string]string {
	t.Helper()
	bins := map[string]string{}
	for _, p := range Platforms {
		path := filepath.Join(dir, PlatformDir(p), cmd)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		// Modes and mtimes of the input must not matter either.
		if err := os.WriteFile(path, []byte("\x7fELF "+cmd+" for "+p.String()), 0o700); err != nil {
			t.Fatal(err)
		}
		bins[p.String()] = path
	}
	return bins
}

func index(t *testing.T, cmd string, bins map[string]string, m Meta) v1.ImageIndex {
	t.Helper()
	idx, err := Index(cmd, bins, m)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// writeAll writes what make images writes for one command into dir.
func writeAll(t *testing.T, dir, cmd string, idx v1.ImageIndex) {
	t.Helper()
	ref := Reference(Repository, cmd, meta.Version)
	if err := WriteLayout(filepath.Join(dir, cmd), idx, ref); err != nil {
		t.Fatal(err)
	}
	for _, p := range Platforms {
		img, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteTarball(filepath.Join(dir, cmd+"-"+p.Architecture+".tar"), img, ref); err != nil {
			t.Fatal(err)
		}
	}
}

// files maps every file under dir to its content.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Two builds from the same binaries, copied to different places at
// different times, write the same bytes: index digest, layout and tarballs.
func TestBuildIsReproducible(t *testing.T) {
	const cmd = "elasti-operator"
	var digests []v1.Hash
	var outputs []map[string]string
	for range 2 {
		in, out := t.TempDir(), t.TempDir()
		idx := index(t, cmd, fakeBinaries(t, in, cmd), meta)
		digests = append(digests, digest(t, idx))
		writeAll(t, out, cmd, idx)
		outputs = append(outputs, files(t, out))
		time.Sleep(1100 * time.Millisecond) // a clock read anywhere would show
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of one input: index %s and %s", digests[0], digests[1])
	}
	if len(outputs[0]) == 0 || !maps.Equal(outputs[0], outputs[1]) {
		for name := range outputs[0] {
			if outputs[0][name] != outputs[1][name] {
				t.Errorf("%s differs between two builds", name)
			}
		}
		t.Errorf("two builds wrote different files: %d and %d files", len(outputs[0]), len(outputs[1]))
	}

	// And the digest does depend on each input.
	in := t.TempDir()
	bins := fakeBinaries(t, in, cmd)
	for what, idx := range map[string]v1.ImageIndex{
		"the commit time": index(t, cmd, bins, Meta{Version: meta.Version, Revision: meta.Revision, Created: meta.Created.Add(time.Second)}),
		"the revision":    index(t, cmd, bins, Meta{Version: meta.Version, Revision: "x", Created: meta.Created}),
		"the command":     index(t, "elasti-resolver", bins, meta),
	} {
		if digest(t, idx) == digests[0] {
			t.Errorf("changing %s left the index digest as it was", what)
		}
	}
	if err := os.WriteFile(bins[Platforms[1].String()], []byte("another binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if digest(t, index(t, cmd, bins, meta)) == digests[0] {
		t.Error("changing the arm64 binary left the index digest as it was")
	}
}

// tarFile is one entry of an image's flattened filesystem.
type tarFile struct {
	hdr  tar.Header
	data []byte
}

// filesystem flattens img's layers.
func filesystem(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]tarFile{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = tarFile{*h, data}
	}
}

// The index holds both platforms as OCI images, each configured to run its
// binary as nonroot, labelled with its source, and holding the binary, the
// users and the CA roots.
func TestImageContents(t *testing.T) {
	const cmd = "elasti-resolver"
	bins := fakeBinaries(t, t.TempDir(), cmd)
	idx := index(t, cmd, bins, meta)

	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if !maps.Equal(im.Annotations, Labels(cmd, meta)) {
		t.Errorf("index annotations %v, want %v", im.Annotations, Labels(cmd, meta))
	}
	var platforms []v1.Platform
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, *d.Platform)
		if d.ArtifactType != "" {
			t.Errorf("%s: artifactType %q; an image is not an artifact", d.Platform, d.ArtifactType)
		}
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, want %s", d.Platform, d.MediaType, types.OCIManifestSchema1)
		}
	}
	if !slices.EqualFunc(platforms, Platforms, func(a, b v1.Platform) bool { return a.Equals(b) }) {
		t.Errorf("platforms %v, want %v", platforms, Platforms)
	}
	want := map[string]string{
		LabelSource:   "https://github.com/elasti-dev/elasti",
		LabelTitle:    cmd,
		LabelVersion:  "v1.2.3",
		LabelRevision: meta.Revision,
		LabelCreated:  "2026-11-24T01:02:03Z",
	}
	if got := Labels(cmd, meta); !maps.Equal(got, want) {
		t.Errorf("Labels = %v, want %v", got, want)
	}

	for _, p := range Platforms {
		img, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/app"}) || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [/app] and none", p, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if !maps.Equal(cf.Config.Labels, want) {
			t.Errorf("%s: labels %v, want %v", p, cf.Config.Labels, want)
		}
		if !cf.Created.Equal(meta.Created) {
			t.Errorf("%s: created %v, want the commit time %v", p, cf.Created, meta.Created)
		}
		for _, h := range cf.History {
			if !h.Created.Equal(meta.Created) {
				t.Errorf("%s: history created %v, want the commit time", p, h.Created)
			}
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.MediaType != types.OCIConfigJSON || !maps.Equal(m.Annotations, want) {
			t.Errorf("%s: config media type %s, annotations %v", p, m.Config.MediaType, m.Annotations)
		}
		for _, l := range m.Layers {
			if l.MediaType != types.OCILayer {
				t.Errorf("%s: layer media type %s, want %s", p, l.MediaType, types.OCILayer)
			}
		}

		fsys := filesystem(t, img)
		bin, err := os.ReadFile(bins[p.String()])
		if err != nil {
			t.Fatal(err)
		}
		app, ok := fsys["app"]
		switch {
		case !ok:
			t.Errorf("%s: no /app", p)
		case !bytes.Equal(app.data, bin):
			t.Errorf("%s: /app is not the %s binary", p, p)
		case app.hdr.Mode != 0o755 || app.hdr.Uid != 0 || app.hdr.Gid != 0:
			t.Errorf("%s: /app mode %o owner %d:%d, want 755 root:root (executable, not writable by nonroot)", p, app.hdr.Mode, app.hdr.Uid, app.hdr.Gid)
		}
		if !strings.Contains(string(fsys["etc/passwd"].data), "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") {
			t.Errorf("%s: /etc/passwd has no nonroot 65532:\n%s", p, fsys["etc/passwd"].data)
		}
		if !strings.Contains(string(fsys["etc/group"].data), "\nnonroot:x:65532:\n") {
			t.Errorf("%s: /etc/group has no nonroot 65532:\n%s", p, fsys["etc/group"].data)
		}
		if tmp := fsys["tmp"].hdr; tmp.Typeflag != tar.TypeDir || tmp.Mode != 0o1777 {
			t.Errorf("%s: /tmp is type %c mode %o, want a directory 1777", p, tmp.Typeflag, tmp.Mode)
		}
		if home := fsys["home/nonroot"].hdr; home.Typeflag != tar.TypeDir || home.Uid != 65532 || home.Gid != 65532 {
			t.Errorf("%s: /home/nonroot is type %c owned %d:%d", p, home.Typeflag, home.Uid, home.Gid)
		}
		ca, ok := fsys["etc/ssl/certs/ca-certificates.crt"]
		if !ok {
			t.Fatalf("%s: no %s", p, CABundle)
		}
		if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(ca.data) {
			t.Errorf("%s: %s holds no certificate", p, CABundle)
		}
		for name, f := range fsys {
			if !f.hdr.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("%s: %s has mtime %v, want the epoch", p, name, f.hdr.ModTime)
			}
		}
		names := slices.Sorted(maps.Keys(fsys))
		wantNames := []string{"app", "etc", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt", "home", "home/nonroot", "tmp"}
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s: files %q, want %q", p, names, wantNames)
		}
	}
}

// The CA bundle is Go's root set, less the roots it trusts only with a
// constraint a PEM file cannot express; each is a CA certificate.
func TestCACertificates(t *testing.T) {
	all, constrained := 0, 0
	for r := range bundle.Roots() {
		all++
		if r.Constraint != nil {
			constrained++
		}
	}
	rest := CACertificates()
	var n int
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !c.IsCA {
			t.Errorf("%s is not a CA", c.Subject)
		}
		n++
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("trailing bytes after the last certificate: %q", rest)
	}
	if n != all-constrained || n < 100 {
		t.Errorf("%d certificates in the bundle; the module has %d roots, %d constrained", n, all, constrained)
	}
}

// A registry on 127.0.0.1 receives the index, and what is pulled back has
// the digests built, index and images.
func TestPushAndPull(t *testing.T) {
	const cmd = "elasti-operator"
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	idx := index(t, cmd, fakeBinaries(t, t.TempDir(), cmd), meta)

	ref := Reference(host+"/elasti", cmd, meta.Version)
	got, err := Push(t.Context(), idx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if want := digest(t, idx); got != want {
		t.Errorf("Push returned %s, built %s", got, want)
	}
	pulled, err := remote.Index(parseRef(t, ref), remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, pulled) != got {
		t.Errorf("pulled %s back, pushed %s", digest(t, pulled), got)
	}
	// By digest too, as a pinned manifest names it, and each platform.
	byDigest, err := remote.Index(parseRef(t, host+"/elasti/"+cmd+"@"+got.String()), remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Platforms {
		built, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := PlatformImage(byDigest, p)
		if err != nil {
			t.Fatal(err)
		}
		if digest(t, back) != digest(t, built) {
			t.Errorf("%s: pulled %s, built %s", p, digest(t, back), digest(t, built))
		}
		layers, err := back.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				t.Errorf("%s: pulling a layer: %v", p, err)
			}
		}
	}
}

// The layout reads back as the index written, and each tarball is the
// platform's image (same config and layers) tagged with the reference
// manifests/ runs.
func TestLayoutAndTarball(t *testing.T) {
	const cmd = "elasti-operator"
	idx := index(t, cmd, fakeBinaries(t, t.TempDir(), cmd), meta)
	out := t.TempDir()
	writeAll(t, out, cmd, idx)

	back, err := ReadLayout(filepath.Join(out, cmd))
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, back) != digest(t, idx) {
		t.Errorf("layout holds %s, built %s", digest(t, back), digest(t, idx))
	}
	var top struct {
		Manifests []v1.Descriptor `json:"manifests"`
	}
	raw, err := os.ReadFile(filepath.Join(out, cmd, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations[refName] != "ghcr.io/elasti-dev/elasti-operator:v1.2.3" {
		t.Errorf("layout index.json names %v", top.Manifests)
	}

	for _, p := range Platforms {
		built, err := PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		tag := name.MustParseReference("ghcr.io/elasti-dev/elasti-operator:v1.2.3").(name.Tag)
		path := filepath.Join(out, cmd+"-"+p.Architecture+".tar")
		loaded, err := tarball.ImageFromPath(path, &tag)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if a, b := mustConfigName(t, loaded), mustConfigName(t, built); a != b {
			t.Errorf("%s: config %s, built %s", path, a, b)
		}
		la, _ := loaded.Layers()
		lb, _ := built.Layers()
		if len(la) != len(lb) {
			t.Fatalf("%s: %d layers, built %d", path, len(la), len(lb))
		}
		for i := range la {
			if digest(t, la[i]) != digest(t, lb[i]) {
				t.Errorf("%s: layer %d is %s, built %s", path, i, digest(t, la[i]), digest(t, lb[i]))
			}
		}
	}
}

func parseRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func mustConfigName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var spdxIDPattern = regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)

// The SBOM has SPDX 2.3's required fields, unique identifiers that every
// relationship resolves, and a package with a checksum for every module
// the binary links, read from the binary itself: here the image builder,
// built for the test (a test binary's build info names no modules).
func TestSBOM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "images")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/elasti-dev/elasti/hack/images")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build, err, out)
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var caRoots *debug.Module
	for _, m := range bi.Deps {
		if m.Path == "golang.org/x/crypto/x509roots/fallback" {
			caRoots = m
		}
	}
	if caRoots == nil {
		t.Fatal("the builder does not link the CA roots' module")
	}
	imgDigest := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	raw, err := SBOM("elasti-operator", Platforms[0], bin, imgDigest, meta, caRoots)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SBOM("elasti-operator", Platforms[0], bin, imgDigest, meta, caRoots)
	if err != nil || !bytes.Equal(raw, again) {
		t.Errorf("two SBOMs of one image differ (%v)", err)
	}
	var doc SPDX
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.Name == "" {
		t.Errorf("document header %q %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID, doc.Name)
	}
	if !strings.HasPrefix(doc.DocumentNamespace, "https://") || !strings.Contains(doc.DocumentNamespace, imgDigest.Hex) {
		t.Errorf("documentNamespace %q is not a URI unique to the image", doc.DocumentNamespace)
	}
	if doc.CreationInfo.Created != "2026-11-24T01:02:03Z" || len(doc.CreationInfo.Creators) == 0 {
		t.Errorf("creationInfo %+v", doc.CreationInfo)
	}
	for _, c := range doc.CreationInfo.Creators {
		if !strings.HasPrefix(c, "Tool: ") && !strings.HasPrefix(c, "Organization: ") && !strings.HasPrefix(c, "Person: ") {
			t.Errorf("creator %q", c)
		}
	}
	ids := map[string]SPDXPackage{}
	for _, p := range doc.Packages {
		if p.Name == "" || p.DownloadLocation == "" || !spdxIDPattern.MatchString(p.SPDXID) {
			t.Errorf("package %+v lacks a required field", p)
		}
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("SPDXID %s twice", p.SPDXID)
		}
		ids[p.SPDXID] = p
		for _, c := range p.Checksums {
			if c.Algorithm != "SHA256" || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(c.ChecksumValue) {
				t.Errorf("%s: checksum %+v", p.Name, c)
			}
		}
	}
	described := false
	for _, r := range doc.Relationships {
		_, a := ids[r.SPDXElementID]
		_, b := ids[r.RelatedSPDXElement]
		if r.SPDXElementID == "SPDXRef-DOCUMENT" && r.RelationshipType == "DESCRIBES" && b {
			described = true
			continue
		}
		if !a || !b {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
	if !described {
		t.Error("the document DESCRIBES nothing")
	}

	byName := map[string]SPDXPackage{}
	for _, p := range ids {
		byName[p.Name] = p
	}
	if p := byName["stdlib"]; p.VersionInfo != strings.TrimPrefix(runtime.Version(), "go") {
		t.Errorf("stdlib package %+v, want version %s", p, runtime.Version())
	}
	if p := byName["elasti-operator"]; p.PrimaryPackagePurpose != "CONTAINER" || len(p.Checksums) != 1 || p.Checksums[0].ChecksumValue != imgDigest.Hex {
		t.Errorf("image package %+v", p)
	}
	if len(bi.Deps) < 5 {
		t.Fatalf("the builder links %d modules", len(bi.Deps))
	}
	for _, m := range bi.Deps {
		p, ok := byName[m.Path]
		if !ok || p.VersionInfo != m.Version || len(p.Checksums) != 1 || p.Comment != "go.sum "+m.Sum && m.Path != caRoots.Path {
			t.Errorf("module %s %s %s: %+v", m.Path, m.Version, m.Sum, p)
		}
	}
	if p := byName[bi.Main.Path]; p.PrimaryPackagePurpose != "APPLICATION" || p.VersionInfo != meta.Version {
		t.Errorf("main module %s: %+v", bi.Main.Path, p)
	}
	if !strings.Contains(byName["golang.org/x/crypto/x509roots/fallback"].Comment, CABundle) {
		t.Errorf("the CA roots' package does not say it is %s", CABundle)
	}
}
