package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/mod/modfile"

	"github.com/elasti-dev/elasti/hack/images/oci"
)

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..")

// makeRun is one `make images` run.
type makeRun struct {
	bin    string // its BIN
	stdout string
	err    error
}

var (
	buildsOnce sync.Once
	builds     [2]makeRun
)

// makeImages runs `make images` twice, into two directories, once per test
// binary: the two real builds (each command for each platform) that every
// test here shares. The first may compile for minutes on a cold cache; the
// second reuses the compiled packages but links again. GOFLAGS=-p=1 keeps
// it to one compile at a time.
func makeImages(t *testing.T) [2]makeRun {
	t.Helper()
	buildsOnce.Do(func() {
		base, err := os.MkdirTemp("", "elasti-images-")
		if err != nil {
			builds[0].err = err
			return
		}
		for i := range builds {
			b := &builds[i]
			b.bin = filepath.Join(base, strconv.Itoa(i))
			cmd := exec.Command("make", "-s", "--no-print-directory", "images", "BIN="+b.bin)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOFLAGS=-p=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				b.err = errors.New(cmd.String() + ": " + err.Error() + "\n" + stderr.String())
			}
			b.stdout = stdout.String()
		}
	})
	for _, b := range builds {
		if b.err != nil {
			t.Fatal(b.err)
		}
	}
	return builds
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builds[0].bin != "" {
		os.RemoveAll(filepath.Dir(builds[0].bin))
	}
	os.Exit(code)
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return strings.TrimSpace(string(out))
}

// tree maps every file under dir to its content.
func tree(t *testing.T, dir string) map[string]string {
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

// Two `make images` runs of one commit, in different directories, build the
// same binaries and write the same bytes: layouts (so index digests),
// tarballs and SBOMs.
func TestMakeImagesIsReproducible(t *testing.T) {
	b := makeImages(t)
	sums := regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	first, second := sums.FindAllString(b[0].stdout, -1), sums.FindAllString(b[1].stdout, -1)
	if len(first) != 6 || !slices.Equal(first, second) {
		t.Errorf("the two builds report different digests (want 2 indexes and 4 images):\n%s\n%s", b[0].stdout, b[1].stdout)
	}
	for _, sub := range []string{"images", "linux_amd64", "linux_arm64"} {
		first, second := tree(t, filepath.Join(b[0].bin, sub)), tree(t, filepath.Join(b[1].bin, sub))
		if len(first) == 0 {
			t.Errorf("%s is empty", sub)
		}
		for name := range first {
			if first[name] != second[name] {
				t.Errorf("%s/%s differs between two builds of one commit", sub, name)
			}
		}
		if !maps.Equal(first, second) {
			t.Errorf("%s: the two builds wrote %d and %d files", sub, len(first), len(second))
		}
	}
	want := []string{}
	for _, line := range strings.Split(b[0].stdout, "\n") {
		if strings.HasPrefix(line, oci.Repository+"/") {
			want = append(want, strings.SplitN(line, "@", 2)[0])
		}
	}
	version := output(t, "make", "-s", "version")
	if len(want) != 2 || want[0] != oci.Repository+"/elasti-operator:"+version || want[1] != oci.Repository+"/elasti-resolver:"+version {
		t.Errorf("make images built %q:\n%s", want, b[0].stdout)
	}
}

// extract returns the file at path (no leading slash) in img.
func extract(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the image: %v", path, err)
		}
		if h.Name == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// The images hold the binaries make images compiled, for their platform,
// with the release's version linked in, and say which commit they are.
func TestMakeImagesContents(t *testing.T) {
	b := makeImages(t)[0]
	version := output(t, "make", "-s", "version")
	head := output(t, "git", "rev-parse", "HEAD")
	commitTime, err := strconv.ParseInt(output(t, "git", "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, cmd := range oci.Commands {
		idx, err := oci.ReadLayout(filepath.Join(b.bin, "images", cmd))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range oci.Platforms {
			img, err := oci.PlatformImage(idx, p)
			if err != nil {
				t.Fatal(err)
			}
			compiled, err := os.ReadFile(filepath.Join(b.bin, oci.PlatformDir(p), cmd))
			if err != nil {
				t.Fatal(err)
			}
			app := extract(t, img, "app")
			if !bytes.Equal(app, compiled) {
				t.Errorf("%s %s: /app is not %s/%s", cmd, p, oci.PlatformDir(p), cmd)
			}
			f, err := elf.NewFile(bytes.NewReader(app))
			if err != nil {
				t.Fatalf("%s %s: /app: %v", cmd, p, err)
			}
			if f.Machine != machines[p.Architecture] {
				t.Errorf("%s %s: /app is for %s", cmd, p, f.Machine)
			}
			if interp := f.Section(".interp"); interp != nil {
				t.Errorf("%s %s: /app is dynamically linked; the image has no libc", cmd, p)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			labels := cf.Config.Labels
			if labels[oci.LabelVersion] != version || !strings.HasPrefix(labels[oci.LabelRevision], head) ||
				labels[oci.LabelCreated] != time.Unix(commitTime, 0).UTC().Format(time.RFC3339) || !cf.Created.Equal(time.Unix(commitTime, 0)) {
				t.Errorf("%s %s: labels %v created %v; want version %s, revision %s, the commit time %d", cmd, p, labels, cf.Created, version, head, commitTime)
			}
			if p.Architecture != "amd64" {
				continue
			}
			// This machine runs amd64: the binary from the image starts
			// and reports the release.
			exe := filepath.Join(t.TempDir(), cmd)
			if err := os.WriteFile(exe, app, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(exe, "--version").CombinedOutput()
			if err != nil || !strings.Contains(string(out), version) {
				t.Errorf("%s --version: %v\n%s\nwant %s", cmd, err, out, version)
			}
		}
	}
}

// The docker-archive tarballs are tagged with the reference manifests/
// runs, which is what `docker load` and `ctr images import` name the image.
func TestMakeImagesTarballs(t *testing.T) {
	b := makeImages(t)[0]
	version := output(t, "make", "-s", "version")
	for _, cmd := range oci.Commands {
		for _, p := range oci.Platforms {
			path := filepath.Join(b.bin, "images", cmd+"-"+p.Architecture+".tar")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(f)
			var manifest []struct {
				Config   string
				RepoTags []string
				Layers   []string
			}
			for {
				h, err := tr.Next()
				if err != nil {
					t.Fatalf("%s: no manifest.json: %v", path, err)
				}
				if h.Name == "manifest.json" {
					if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
			f.Close()
			want := "ghcr.io/elasti-dev/" + cmd + ":" + version
			if len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || manifest[0].RepoTags[0] != want || len(manifest[0].Layers) != 2 {
				t.Errorf("%s: manifest.json %+v, want one image tagged %s with 2 layers", path, manifest, want)
			}
		}
	}
}

// Each SBOM lists the modules of the product's go.mod the binary links, at
// that go.mod's versions, and the CA roots' module at the version the image
// builder's go.mod (this module's) requires: the roots are the builder's.
func TestMakeImagesSBOM(t *testing.T) {
	b := makeImages(t)[0]
	required := map[string]string{}
	var gomod *modfile.File
	for _, name := range []string{"go.mod", filepath.Join(root, "go.mod")} {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if gomod, err = modfile.Parse(name, src, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range gomod.Require {
			required[r.Mod.Path] = r.Mod.Version
		}
	}
	for _, cmd := range oci.Commands {
		for _, p := range oci.Platforms {
			path := filepath.Join(b.bin, "images", cmd+"-"+p.Architecture+".spdx.json")
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var doc oci.SPDX
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			versions := map[string]string{}
			for _, pkg := range doc.Packages {
				versions[pkg.Name] = pkg.VersionInfo
			}
			for _, mod := range []string{"k8s.io/client-go", "k8s.io/apimachinery", "github.com/prometheus/client_golang", "golang.org/x/crypto/x509roots/fallback"} {
				if versions[mod] == "" || versions[mod] != required[mod] {
					t.Errorf("%s: %s at %q, go.mod requires %q", path, mod, versions[mod], required[mod])
				}
			}
			if versions[gomod.Module.Mod.Path] == "" || versions[cmd] == "" {
				t.Errorf("%s: no package for the main module or the image: %v", path, versions)
			}
		}
	}
}

// make push's program pushes both layouts to a registry on 127.0.0.1;
// what is pulled back has the digests built.
func TestMakeImagesPush(t *testing.T) {
	b := makeImages(t)[0]
	version := output(t, "make", "-s", "version")
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	dest := strings.TrimPrefix(srv.URL, "http://") + "/mirror/elasti"

	var out bytes.Buffer
	if err := run(t.Context(), []string{"-out", filepath.Join(b.bin, "images"), "-version", version, "-push", dest + "/"}, &out); err != nil {
		t.Fatal(err)
	}
	pushed := regexp.MustCompile(`(?m)^(\S+):`+regexp.QuoteMeta(version)+`@(sha256:[0-9a-f]{64})$`).FindAllStringSubmatch(out.String(), -1)
	if len(pushed) != len(oci.Commands) {
		t.Fatalf("push printed:\n%s", out.String())
	}
	for i, cmd := range oci.Commands {
		built, err := oci.ReadLayout(filepath.Join(b.bin, "images", cmd))
		if err != nil {
			t.Fatal(err)
		}
		want, err := built.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if pushed[i][1] != dest+"/"+cmd || pushed[i][2] != want.String() {
			t.Errorf("push printed %s@%s, want %s/%s@%s", pushed[i][1], pushed[i][2], dest, cmd, want)
		}
		for _, ref := range []string{dest + "/" + cmd + ":" + version, dest + "/" + cmd + "@" + want.String()} {
			r, err := name.ParseReference(ref, name.StrictValidation)
			if err != nil {
				t.Fatal(err)
			}
			back, err := remote.Index(r, remote.WithContext(t.Context()))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := back.Digest(); err != nil || got != want {
				t.Errorf("pulled %s: %s (%v), built %s", ref, got, err, want)
			}
		}
	}

	// A layout of another version is refused rather than pushed under
	// this tag.
	err := run(t.Context(), []string{"-out", filepath.Join(b.bin, "images"), "-version", "v9.9.9", "-push", dest}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "v9.9.9") {
		t.Errorf("pushing a %s layout as v9.9.9: %v", version, err)
	}
}

// The images carry no zoneinfo (see oci's base), so a package that looks a
// time zone up must link Go's own database (import _ "time/tzdata"), and
// every binary that uses the package ships it. pkg/schedule does, for
// enabledPeriod.timeZone.
func TestTimeZoneLookupsShipTheirData(t *testing.T) {
	embedsTZData := regexp.MustCompile(`(?m)^\s*(import\s+)?_\s+"time/tzdata"\s*$`)
	lookups := map[string]bool{} // package directory -> embeds time/tzdata
	for _, top := range []string{"cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dir := filepath.Dir(path)
			if bytes.Contains(src, []byte("LoadLocation(")) {
				lookups[dir] = lookups[dir] || false
			}
			if embedsTZData.Match(src) {
				lookups[dir] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for dir, embeds := range lookups {
		if !embeds {
			if rel, err := filepath.Rel(root, dir); err == nil {
				dir = rel
			}
			t.Errorf("%s looks up a time zone, but the images ship no zoneinfo: import _ \"time/tzdata\" there", dir)
		}
	}
	if _, ok := lookups[filepath.Join(root, "pkg", "schedule")]; !ok {
		t.Error("pkg/schedule no longer looks up a time zone: update this test and the README's image section")
	}
}
