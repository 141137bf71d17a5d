package release_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/elasti-dev/elasti/hack/images/oci"
	"github.com/elasti-dev/elasti/pkg/command"
)

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..")

// elastiImage prefixes the names of elasti's own images.
const elastiImage = "ghcr.io/elasti-dev/elasti-"

// clientCommands are the commands under cmd/ that run on a user's machine,
// not in the cluster: make build builds them, and they have no image.
var clientCommands = []string{"kubectl-elasti"}

// releaseVersion is what hack/set-image-tag.sh accepts as a tag.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z][0-9A-Za-z.-]*)?$`)

// makeVar returns the value of the Makefile line `name := value` in dir.
func makeVar(dir, name string) (string, error) {
	src, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `[ \t]*:=[ \t]*(.*?)[ \t]*$`).FindSubmatch(src)
	if m == nil {
		return "", fmt.Errorf("the Makefile has no line %q", name+" := ...")
	}
	return string(m[1]), nil
}

// readVersion returns the Makefile's VERSION in dir: the release the tree
// builds.
func readVersion(dir string) (string, error) { return makeVar(dir, "VERSION") }

// image is one container image a manifest or overlay names.
type image struct {
	file, where string
	ref         string
	pullPolicy  string
}

// splitImage splits an image reference into name, tag and digest; the tag
// is after the last ":" of the last path element (a registry port is not a
// tag).
func splitImage(ref string) (name, tag, digest string) {
	name = ref
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, digest = name[:i], name[i+1:]
	}
	slash := strings.LastIndexByte(name, '/')
	if i := strings.LastIndexByte(name, ':'); i > slash {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// pinProblem says why ref is not pinned, or "".
func pinProblem(ref string) string {
	_, tag, digest := splitImage(ref)
	switch {
	case ref == "":
		return "an empty image"
	case tag == "" && digest == "":
		return fmt.Sprintf("%q has no tag, which means latest", ref)
	case tag == "latest":
		return fmt.Sprintf("%q uses the moving tag latest", ref)
	}
	return ""
}

func isKustomization(path string) bool {
	switch filepath.Base(path) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// manifestFiles lists the files kubectl or kustomize read under dir's
// manifests/ and deploy/.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	for _, top := range []string{"manifests", "deploy"} {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				files = append(files, path)
			default:
				if isKustomization(path) {
					files = append(files, path)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// decodeAll decodes every YAML (or JSON) document of a file.
func decodeAll(path string) ([]map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// containerImages finds the image of every container, init container and
// ephemeral container anywhere in v (a pod template, a patch, a CronJob).
// A container without an image (a strategic-merge patch) names none.
func containerImages(v any, where string, found func(where, ref, pullPolicy string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			list, isList := child.([]any)
			if isList && (k == "containers" || k == "initContainers" || k == "ephemeralContainers") {
				for _, c := range list {
					c, _ := c.(map[string]any)
					ref, ok := c["image"].(string)
					if !ok {
						continue
					}
					policy, _ := c["imagePullPolicy"].(string)
					found(fmt.Sprintf("%s container %v", where, c["name"]), ref, policy)
				}
				continue
			}
			containerImages(child, where, found)
		}
	case []any:
		for _, child := range v {
			containerImages(child, where, found)
		}
	}
}

// images returns every container image under dir's manifests/ and deploy/,
// and the problems with the files: undecodable ones, and kustomize
// `images:` entries that unpin an image or retag elasti's.
func images(dir string) ([]image, []string) {
	files, err := manifestFiles(dir)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var all []image
	var problems []string
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		docs, err := decodeAll(path)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, doc := range docs {
			where := fmt.Sprintf("%v %v", doc["kind"], nestedName(doc))
			containerImages(doc, where, func(where, ref, policy string) {
				all = append(all, image{file: rel, where: where, ref: ref, pullPolicy: policy})
			})
			if !isKustomization(path) {
				continue
			}
			entries, _ := doc["images"].([]any)
			for _, e := range entries {
				e, _ := e.(map[string]any)
				name, _ := e["name"].(string)
				newName, _ := e["newName"].(string)
				if strings.HasPrefix(name, elastiImage) || strings.HasPrefix(newName, elastiImage) {
					problems = append(problems, fmt.Sprintf("%s: the images entry for %s retags an elasti image; set the tag in manifests/ with make set-image-tag instead", rel, name))
					continue
				}
				if tag, _ := e["newTag"].(string); tag == "latest" {
					problems = append(problems, fmt.Sprintf("%s: the images entry for %s sets newTag latest", rel, name))
				}
			}
		}
	}
	return all, problems
}

func nestedName(doc map[string]any) any {
	meta, _ := doc["metadata"].(map[string]any)
	return meta["name"]
}

// imageProblems lists every image under dir's manifests/ and deploy/ that
// is not pinned, every elasti image not tagged version or not pulled
// IfNotPresent, and the elasti images the plain install lacks.
func imageProblems(dir, version string) []string {
	all, problems := images(dir)
	installs := map[string]bool{}
	for _, img := range all {
		at := img.file + ": " + img.where + ": "
		if p := pinProblem(img.ref); p != "" {
			problems = append(problems, at+p)
			continue
		}
		name, tag, _ := splitImage(img.ref)
		if !strings.HasPrefix(name, elastiImage) {
			continue
		}
		if tag != version {
			problems = append(problems, fmt.Sprintf("%s%q is tagged %q, but the Makefile's VERSION is %q (make set-image-tag TAG=... changes both)", at, img.ref, tag, version))
		}
		if img.pullPolicy != "IfNotPresent" {
			problems = append(problems, fmt.Sprintf("%s%q has imagePullPolicy %q, want IfNotPresent: a release tag never moves", at, img.ref, img.pullPolicy))
		}
		if strings.HasPrefix(img.file, "manifests"+string(filepath.Separator)) {
			installs[strings.TrimPrefix(name, elastiImage)] = true
		}
	}
	for _, want := range []string{"operator", "resolver"} {
		if !installs[want] {
			problems = append(problems, fmt.Sprintf("manifests/ runs no %s%s image", elastiImage, want))
		}
	}
	return problems
}

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func TestVersionIsARelease(t *testing.T) {
	v, err := readVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	if !releaseVersion.MatchString(v) {
		t.Errorf("the Makefile's VERSION %q is not a release version such as v1.2.3", v)
	}
}

// Every image is pinned, and elasti's carry the Makefile's VERSION: what
// kubectl apply -f manifests/ installs is that release and nothing else.
func TestImagesArePinnedToTheVersion(t *testing.T) {
	v, err := readVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	report(t, imageProblems(root, v))
}

// The check itself catches what it is for.
func TestImageProblemsAreFound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "manifests/op.yaml", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: op}
spec:
  template:
    spec:
      initContainers:
      - {name: init, image: "busybox"}
      containers:
      - {name: manager, image: ghcr.io/elasti-dev/elasti-operator:v0.0.1, imagePullPolicy: IfNotPresent}
      - {name: sidecar, image: "localhost:5000/sidecar:latest"}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - {name: resolver, image: "ghcr.io/elasti-dev/elasti-resolver:v1.0.0", imagePullPolicy: Always}
`)
	write(t, dir, "deploy/overlays/x/kustomization.yaml", `
images:
- {name: ghcr.io/elasti-dev/elasti-operator, newTag: v2.0.0}
- {name: nginx, newTag: latest}
`)
	got := strings.Join(imageProblems(dir, "v1.0.0"), "\n")
	for _, want := range []string{
		`init: "busybox" has no tag`,
		`sidecar: "localhost:5000/sidecar:latest" uses the moving tag latest`,
		`manager: "ghcr.io/elasti-dev/elasti-operator:v0.0.1" is tagged "v0.0.1", but the Makefile's VERSION is "v1.0.0"`,
		`resolver: "ghcr.io/elasti-dev/elasti-resolver:v1.0.0" has imagePullPolicy "Always"`,
		`retags an elasti image`,
		`nginx sets newTag latest`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q reported; got:\n%s", want, got)
		}
	}
	if n := len(strings.Split(got, "\n")); n != 6 {
		t.Errorf("%d problems, want 6:\n%s", n, got)
	}
}

func TestSplitImage(t *testing.T) {
	for ref, want := range map[string][3]string{
		"busybox":                            {"busybox", "", ""},
		"localhost:5000/app":                 {"localhost:5000/app", "", ""},
		"localhost:5000/app:1.2":             {"localhost:5000/app", "1.2", ""},
		"ghcr.io/a/b:v1@sha256:0a1b":         {"ghcr.io/a/b", "v1", "sha256:0a1b"},
		"gcr.io/distroless/static@sha256:ff": {"gcr.io/distroless/static", "", "sha256:ff"},
	} {
		n, tag, d := splitImage(ref)
		if [3]string{n, tag, d} != want {
			t.Errorf("splitImage(%q) = %q %q %q, want %q", ref, n, tag, d, want)
		}
	}
}

// dockerArgs returns the defaults of the Dockerfile's ARGs: global (before
// the first FROM, usable in FROM lines) and all.
func dockerArgs(dockerfile string) (global, all map[string]string) {
	global, all = map[string]string{}, map[string]string{}
	inStage := false
	for _, line := range instructions(dockerfile) {
		f := strings.Fields(line)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			inStage = true
		case "ARG":
			if len(f) < 2 {
				continue
			}
			name, value, ok := strings.Cut(f[1], "=")
			if !ok {
				continue
			}
			value = strings.Trim(value, `"`)
			all[name] = value
			if !inStage {
				global[name] = value
			}
		}
	}
	return global, all
}

// instructions returns the Dockerfile's instructions, continuation lines
// joined and comments dropped.
func instructions(dockerfile string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(dockerfile) {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		out = append(out, strings.Join(strings.Fields(cur.String()), " "))
		cur.Reset()
	}
	return out
}

func readDockerfile(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// The Dockerfile links the Makefile's VERSION into an image's binary, so an
// image reports the tag it is pushed under.
func dockerVersionProblems(dockerfile, version string) []string {
	_, args := dockerArgs(dockerfile)
	if got, ok := args["VERSION"]; !ok {
		return []string{"the Dockerfile has no ARG VERSION=..."}
	} else if got != version {
		return []string{fmt.Sprintf("the Dockerfile's ARG VERSION is %q, the Makefile's VERSION %q (make set-image-tag TAG=... sets both)", got, version)}
	}
	return nil
}

func TestDockerfileVersionIsTheMakefiles(t *testing.T) {
	v, err := readVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	report(t, dockerVersionProblems(readDockerfile(t, root), v))
}

// buildProblems checks that the Dockerfile's go build and make build's
// build of cmd/ are one command: static, with the same flags, and linking
// the version into the variable the binaries read.
func buildProblems(dir, dockerfile string) []string {
	var problems []string
	env, err := makeVar(dir, "GO_BUILD_ENV")
	if err != nil {
		return []string{err.Error()}
	}
	flags, err := makeVar(dir, "GO_BUILD_FLAGS")
	if err != nil {
		return []string{err.Error()}
	}
	if env != "CGO_ENABLED=0" {
		problems = append(problems, fmt.Sprintf("the Makefile's GO_BUILD_ENV is %q, want CGO_ENABLED=0 (a static binary for a distroless image)", env))
	}
	link := "-X " + command.VersionVariable + "="
	if !strings.Contains(flags, link+"$(VERSION)") {
		problems = append(problems, fmt.Sprintf("the Makefile's GO_BUILD_FLAGS %q do not set the version: want %s$(VERSION)", flags, link))
	}
	makefile, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return append(problems, err.Error())
	}
	if !strings.Contains(string(makefile), "\t$(GO_BUILD_ENV) $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/ ./cmd/...\n") {
		problems = append(problems, "make build does not build ./cmd/... with $(GO_BUILD_ENV) and $(GO_BUILD_FLAGS)")
	}

	var builds []string
	for _, ins := range instructions(dockerfile) {
		if strings.HasPrefix(strings.ToUpper(ins), "RUN ") && strings.Contains(ins, " go build ") {
			builds = append(builds, ins)
		}
	}
	if len(builds) != 1 {
		return append(problems, fmt.Sprintf("the Dockerfile has %d RUN instructions with a go build, want 1", len(builds)))
	}
	build := builds[0]
	before, after, _ := strings.Cut(build, " go build ")
	dockerFlags, _, ok := strings.Cut(after, " -o ")
	if !ok {
		return append(problems, "the Dockerfile's go build has no -o: "+build)
	}
	if !slices.Contains(strings.Fields(before), env) {
		problems = append(problems, fmt.Sprintf("the Dockerfile's go build does not run with %s: %s", env, build))
	}
	if want := strings.ReplaceAll(flags, "$(VERSION)", "${VERSION}"); dockerFlags != want {
		problems = append(problems, fmt.Sprintf("the Dockerfile builds with flags %s, make build with %s; keep them one command", dockerFlags, want))
	}
	return problems
}

func TestDockerfileAndMakeBuildAreOneBuild(t *testing.T) {
	report(t, buildProblems(root, readDockerfile(t, root)))
}

func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies what hack/set-image-tag.sh reads and writes into a
// temporary directory.
func copyTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"manifests", "deploy", "charts"} {
		if err := os.CopyFS(filepath.Join(dir, d), os.DirFS(filepath.Join(root, d))); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"Makefile", "Dockerfile", "go.mod", "hack/set-image-tag.sh"} {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, f, string(src))
	}
	if err := os.Chmod(filepath.Join(dir, "hack/set-image-tag.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshot maps every file under dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func setImageTag(dir, tag string) (string, error) {
	cmd := exec.Command(filepath.Join(dir, "hack", "set-image-tag.sh"), tag)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// make set-image-tag TAG=... leaves a tree whose checks all pass for the
// new version; a digest that named the old image goes with the old tag.
func TestSetImageTagRetagsEverything(t *testing.T) {
	dir := copyTree(t)
	old, err := readVersion(dir)
	if err != nil {
		t.Fatal(err)
	}
	op := filepath.Join(dir, "manifests", "20-operator.yaml")
	src, err := os.ReadFile(op)
	if err != nil {
		t.Fatal(err)
	}
	pinned := strings.Replace(string(src), "image: "+elastiImage+"operator:"+old, `image: "`+elastiImage+`operator:`+old+`@sha256:`+strings.Repeat("ab", 32)+`"`, 1)
	if pinned == string(src) {
		t.Fatalf("%s does not run %soperator:%s", op, elastiImage, old)
	}
	write(t, dir, "manifests/20-operator.yaml", pinned)

	const tag = "v9.8.7-rc.1"
	if out, err := setImageTag(dir, tag); err != nil {
		t.Fatalf("set-image-tag %s: %v\n%s", tag, err, out)
	}
	if v, err := readVersion(dir); err != nil || v != tag {
		t.Fatalf("the Makefile's VERSION is %q (%v), want %q", v, err, tag)
	}
	report(t, imageProblems(dir, tag))
	report(t, dockerVersionProblems(readDockerfile(t, dir), tag))
	report(t, buildProblems(dir, readDockerfile(t, dir)))
	if src, _ := os.ReadFile(op); !strings.Contains(string(src), `image: "`+elastiImage+`operator:`+tag+`"`) {
		t.Errorf("the digest-pinned, quoted operator image was not retagged:\n%s", src)
	}
	report(t, chartVersionProblems(dir, tag))
}

// TestChartVersionIsTheRelease: charts/elasti runs the images of VERSION
// by default (its appVersion) and is versioned as that release.
func TestChartVersionIsTheRelease(t *testing.T) {
	version, err := readVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	report(t, chartVersionProblems(root, version))
}

// chartVersionProblems lists where charts/elasti/Chart.yaml disagrees with
// the release version.
func chartVersionProblems(dir, version string) []string {
	src, err := os.ReadFile(filepath.Join(dir, "charts", "elasti", "Chart.yaml"))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for field, want := range map[string]string{"appVersion": version, "version": strings.TrimPrefix(version, "v")} {
		m := regexp.MustCompile(`(?m)^` + field + `:\s*(\S+)\s*$`).FindSubmatch(src)
		if m == nil || string(m[1]) != want {
			problems = append(problems, fmt.Sprintf("charts/elasti/Chart.yaml: %s is not %q (make set-image-tag TAG=... sets it)", field, want))
		}
	}
	return problems
}

func TestSetImageTagRefusesNonReleases(t *testing.T) {
	dir := copyTree(t)
	before := snapshot(t, dir)
	for _, tag := range []string{"", "latest", "1.2.3", "v1.2", "v1.2.3+build.5", "v1.2.3#x", "v1.2.3 latest"} {
		out, err := setImageTag(dir, tag)
		if err == nil {
			t.Errorf("set-image-tag %q succeeded:\n%s", tag, out)
		} else if !strings.Contains(out, "set-image-tag: ") {
			t.Errorf("set-image-tag %q failed without saying why: %v\n%s", tag, err, out)
		}
		if after := snapshot(t, dir); !maps.Equal(before, after) {
			t.Fatalf("set-image-tag %q changed files although it refused", tag)
		}
	}
}

// goModGo returns the Go that go.mod asks to build with: its toolchain
// line, else its go line.
func goModGo(dir string) (string, error) {
	src, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	if m := regexp.MustCompile(`(?m)^toolchain go(\S+)\s*$`).FindSubmatch(src); m != nil {
		return string(m[1]), nil
	}
	if m := regexp.MustCompile(`(?m)^go (\S+)\s*$`).FindSubmatch(src); m != nil {
		return string(m[1]), nil
	}
	return "", errors.New("go.mod has neither a toolchain nor a go line")
}

var dockerVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// expand substitutes ${NAME} and $NAME from args, repeatedly, since an
// ARG's default may name an earlier ARG.
func expand(s string, args map[string]string) string {
	for range 5 {
		next := dockerVar.ReplaceAllStringFunc(s, func(v string) string {
			name := strings.Trim(v, "${}")
			if value, ok := args[name]; ok {
				return value
			}
			return v
		})
		if next == s {
			break
		}
		s = next
	}
	return s
}

// stage is one FROM of a Dockerfile.
type stage struct {
	base, name string
	// fromStage is set when base is an earlier stage, not an image.
	fromStage bool
	// user is the stage's last USER.
	user string
}

func stages(dockerfile string) []stage {
	global, _ := dockerArgs(dockerfile)
	var out []stage
	names := map[string]bool{}
	for _, ins := range instructions(dockerfile) {
		f := strings.Fields(ins)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			var s stage
			for i := 1; i < len(f); i++ {
				switch {
				case strings.HasPrefix(f[i], "--"):
				case strings.EqualFold(f[i], "AS") && i+1 < len(f):
					s.name = f[i+1]
					i++
				case s.base == "":
					s.base = expand(f[i], global)
				}
			}
			s.fromStage = names[s.base]
			if s.name != "" {
				names[s.name] = true
			}
			out = append(out, s)
		case "USER":
			if len(out) > 0 && len(f) > 1 {
				out[len(out)-1].user = f[1]
			}
		}
	}
	return out
}

// dockerGoProblems checks that the builder's Go is exactly go.mod's.
func dockerGoProblems(dir, dockerfile string) []string {
	want, err := goModGo(dir)
	if err != nil {
		return []string{err.Error()}
	}
	_, args := dockerArgs(dockerfile)
	var problems []string
	if got := args["GO_VERSION"]; got != want {
		problems = append(problems, fmt.Sprintf("the Dockerfile's ARG GO_VERSION is %q, go.mod's Go %q: change both together", got, want))
	}
	all := stages(dockerfile)
	if len(all) == 0 {
		return append(problems, "the Dockerfile has no FROM")
	}
	name, tag, _ := splitImage(all[0].base)
	if (name != "golang" && name != "docker.io/library/golang") || (tag != want && !strings.HasPrefix(tag, want+"-")) {
		problems = append(problems, fmt.Sprintf("the builder stage is FROM %s, want golang:%s or golang:%s-<variant> (go.mod's Go)", all[0].base, want, want))
	}
	return problems
}

func TestDockerfileGoIsGoMods(t *testing.T) {
	report(t, dockerGoProblems(root, readDockerfile(t, root)))
}

// dockerBaseProblems checks that every base image is pinned and the final
// stage runs as a non-root user.
func dockerBaseProblems(dockerfile string) []string {
	var problems []string
	all := stages(dockerfile)
	for _, s := range all {
		if s.fromStage || s.base == "scratch" {
			continue
		}
		if strings.Contains(s.base, "$") {
			problems = append(problems, fmt.Sprintf("FROM %s: a variable without a default", s.base))
		} else if p := pinProblem(s.base); p != "" {
			problems = append(problems, "FROM: "+p)
		}
	}
	if len(all) > 0 {
		switch user := all[len(all)-1].user; {
		case user == "":
			problems = append(problems, "the final stage sets no USER; the image would run as the base's user")
		case user == "root" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:"):
			problems = append(problems, "the final stage runs as root: USER "+user)
		}
	}
	return problems
}

func TestDockerfileBasesArePinnedAndNonRoot(t *testing.T) {
	report(t, dockerBaseProblems(readDockerfile(t, root)))
}

// The Dockerfile checks catch what they are for.
func TestDockerfileProblemsAreFound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "go.mod", "module x\n\ngo 1.26.0\n\ntoolchain go1.26.8\n")
	dockerfile := `ARG GO_VERSION=1.26.7
ARG BASE=gcr.io/distroless/static
FROM golang:${GO_VERSION} AS builder
FROM builder AS again
FROM ${BASE}
USER 0:0
`
	got := strings.Join(append(dockerGoProblems(dir, dockerfile), dockerBaseProblems(dockerfile)...), "\n")
	for _, want := range []string{
		`ARG GO_VERSION is "1.26.7", go.mod's Go "1.26.8"`,
		`the builder stage is FROM golang:1.26.7, want golang:1.26.8`,
		`FROM: "gcr.io/distroless/static" has no tag`,
		`runs as root: USER 0:0`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q reported; got:\n%s", want, got)
		}
	}
	if n := len(strings.Split(got, "\n")); n != 4 {
		t.Errorf("%d problems, want 4:\n%s", n, got)
	}
	if v, err := goModGo(dir); err != nil || v != "1.26.8" {
		t.Errorf("goModGo = %q, %v; want the toolchain line's 1.26.8", v, err)
	}
	write(t, dir, "go.mod", "module x\n\ngo 1.26.3\n")
	if v, err := goModGo(dir); err != nil || v != "1.26.3" {
		t.Errorf("goModGo without a toolchain line = %q, %v; want the go line's 1.26.3", v, err)
	}
}

// docs/development/releases.md names the pins it explains; when one
// changes, so must that page.
func TestReadmeNamesThePins(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "docs", "development", "releases.md"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := readDockerfile(t, root)
	global, _ := dockerArgs(dockerfile)
	vulncheck, err := makeVar(root, "GOVULNCHECK_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"govulncheck@" + vulncheck,
		"go" + global["GO_VERSION"],
		expand(global["GO_IMAGE"], global),
		global["RUNTIME_IMAGE"],
	} {
		if want == "" || !bytes.Contains(readme, []byte(want)) {
			t.Errorf("docs/development/releases.md does not mention %q", want)
		}
	}
}

// finalStage returns the instructions of the Dockerfile's last stage.
func finalStage(dockerfile string) []string {
	all := instructions(dockerfile)
	last := -1
	for i, ins := range all {
		if strings.EqualFold(strings.Fields(ins)[0], "FROM") {
			last = i
		}
	}
	return all[last+1:]
}

var dockerLabel = regexp.MustCompile(`([A-Za-z0-9._-]+)=("([^"]*)"|(\S+))`)

// makeTarget returns the recipe of target in the Makefile in dir, its lines
// joined.
func makeTarget(dir, target string) (string, error) {
	src, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?ms)^` + regexp.QuoteMeta(target) + `:[^\n]*\n((?:\t[^\n]*\n)+)`).FindSubmatch(src)
	if m == nil {
		return "", fmt.Errorf("the Makefile has no target %s", target)
	}
	return strings.ReplaceAll(string(m[1]), "\\\n", " "), nil
}

// imageSpecProblems holds the Dockerfile's final stage (where the binary
// goes, ENTRYPOINT, USER, labels) and the Makefile's images target (the
// build, the platforms) to what `make images` builds, hack/images/oci: an
// image built with Docker runs and reads like a release.
func imageSpecProblems(dir, dockerfile string) []string {
	var problems []string
	version, err := readVersion(dir)
	if err != nil {
		return []string{err.Error()}
	}
	if want := oci.Repository + "/elasti-"; elastiImage != want {
		problems = append(problems, fmt.Sprintf("make images names its images %s<command>, the manifests run %s<command>", want, elastiImage))
	}

	var entrypoint []string
	var user, copied string
	labels := map[string]string{}
	for _, ins := range finalStage(dockerfile) {
		op, rest, _ := strings.Cut(ins, " ")
		switch strings.ToUpper(op) {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &entrypoint); err != nil {
				problems = append(problems, fmt.Sprintf("the Dockerfile's ENTRYPOINT %s is not the exec (JSON) form: %v", rest, err))
			}
		case "USER":
			user = rest
		case "COPY":
			f := strings.Fields(rest)
			if slices.Contains(f, "--from=builder") {
				copied = f[len(f)-1]
			}
		case "LABEL":
			for _, m := range dockerLabel.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[3] + m[4]
			}
		}
	}
	if !slices.Equal(entrypoint, oci.Entrypoint()) {
		problems = append(problems, fmt.Sprintf("the Dockerfile's ENTRYPOINT is %q, make images' %q", entrypoint, oci.Entrypoint()))
	}
	if user != oci.User {
		problems = append(problems, fmt.Sprintf("the Dockerfile's USER is %q, make images' %q", user, oci.User))
	}
	if copied != oci.Binary {
		problems = append(problems, fmt.Sprintf("the Dockerfile copies the binary to %q, make images to %q", copied, oci.Binary))
	}
	// Every label make images sets, with the values it sets for each
	// command, once the build args it documents are given.
	meta := oci.Meta{Version: version, Revision: strings.Repeat("0a", 20), Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, args := dockerArgs(dockerfile)
	for _, cmd := range oci.Commands {
		args := maps.Clone(args)
		args["CMD"], args["REVISION"], args["CREATED"] = cmd, meta.Revision, "2026-01-02T03:04:05Z"
		got := map[string]string{}
		for k, v := range labels {
			got[k] = expand(v, args)
		}
		if want := oci.Labels(cmd, meta); !maps.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("with CMD=%s, the Dockerfile's labels are %v, make images' %v", cmd, got, want))
		}
	}

	var cmds []string
	entries, err := os.ReadDir(filepath.Join(dir, "cmd"))
	if err != nil {
		return append(problems, err.Error())
	}
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(clientCommands, e.Name()) {
			cmds = append(cmds, e.Name())
		}
	}
	if !slices.Equal(cmds, oci.Commands) {
		problems = append(problems, fmt.Sprintf("cmd/ holds %q, make images builds images of %q", cmds, oci.Commands))
	}

	platforms, err := makeVar(dir, "IMAGE_PLATFORMS")
	if err != nil {
		return append(problems, err.Error())
	}
	var want []string
	for _, p := range oci.Platforms {
		want = append(want, p.String())
	}
	if got := strings.Fields(platforms); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("the Makefile's IMAGE_PLATFORMS are %q, hack/images' %q", got, want))
	}
	recipe, err := makeTarget(dir, "images")
	if err != nil {
		return append(problems, err.Error())
	}
	if !regexp.MustCompile(`\$\(GO_BUILD_ENV\) GOOS=\S+ GOARCH=\S+ \$\(GO\) build \$\(GO_BUILD_FLAGS\) -o \$\(BIN\)/\S+ \./cmd/\.\.\.;`).MatchString(recipe) {
		problems = append(problems, "make images does not build ./cmd/... with $(GO_BUILD_ENV) and $(GO_BUILD_FLAGS) for each platform:\n"+recipe)
	}
	return problems
}

// An image built from the Dockerfile has make images' entrypoint, user,
// binary path and labels, and make images builds its binaries as the
// Dockerfile does (TestDockerfileAndMakeBuildAreOneBuild holds the flags).
func TestDockerfileIsMakeImages(t *testing.T) {
	report(t, imageSpecProblems(root, readDockerfile(t, root)))
}

// The check catches each way the Dockerfile or the Makefile can drift.
func TestImageSpecProblemsAreFound(t *testing.T) {
	dir := copyTree(t)
	if err := os.CopyFS(filepath.Join(dir, "cmd"), os.DirFS(filepath.Join(root, "cmd"))); err != nil {
		t.Fatal(err)
	}
	if problems := imageSpecProblems(dir, readDockerfile(t, dir)); len(problems) != 0 {
		t.Fatalf("the copied tree has problems: %q", problems)
	}
	if err := os.Mkdir(filepath.Join(dir, "cmd", "elasti-extra"), 0o755); err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mk := strings.Replace(string(makefile), "IMAGE_PLATFORMS   := linux/amd64 linux/arm64", "IMAGE_PLATFORMS := linux/amd64", 1)
	mk = strings.Replace(mk, "$(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/$${platform", "$(GO) build -o $(BIN)/$${platform", 1)
	if mk == string(makefile) {
		t.Fatal("the Makefile's images target changed; update this test")
	}
	write(t, dir, "Makefile", mk)
	dockerfile := readDockerfile(t, dir)
	for old, repl := range map[string]string{
		`ENTRYPOINT ["/app"]`:                           `ENTRYPOINT /app`,
		"USER 65532:65532":                              "USER 65532",
		"COPY --from=builder /out/app /app":             "COPY --from=builder /out/app /bin/app",
		`org.opencontainers.image.title="${CMD}"`:       `org.opencontainers.image.title="elasti"`,
		`org.opencontainers.image.created="${CREATED}"`: `org.opencontainers.image.vendor="elasti"`,
	} {
		if !strings.Contains(dockerfile, old) {
			t.Fatalf("the Dockerfile has no %q; update this test", old)
		}
		dockerfile = strings.Replace(dockerfile, old, repl, 1)
	}
	got := strings.Join(imageSpecProblems(dir, dockerfile), "\n")
	for _, want := range []string{
		`ENTRYPOINT /app is not the exec (JSON) form`,
		`USER is "65532", make images' "65532:65532"`,
		`copies the binary to "/bin/app", make images to "/app"`,
		`with CMD=elasti-operator, the Dockerfile's labels are`,
		`with CMD=elasti-resolver, the Dockerfile's labels are`,
		`cmd/ holds ["elasti-extra" "elasti-operator" "elasti-resolver"]`,
		`IMAGE_PLATFORMS are ["linux/amd64"]`,
		`make images does not build ./cmd/... with $(GO_BUILD_ENV) and $(GO_BUILD_FLAGS)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no problem %q reported; got:\n%s", want, got)
		}
	}
	// The ENTRYPOINT's problem is also that it differs.
	if n := len(imageSpecProblems(dir, dockerfile)); n != 9 {
		t.Errorf("%d problems, want 9:\n%s", n, got)
	}
}
