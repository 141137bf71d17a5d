package release_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The Makefile names every module of the workspace: in workspace mode
// `go test ./...` at the root matches only the root module's packages, so a
// module go.work uses but MODULES lacks would never be built, vetted or
// tested by make.
func TestMakefileNamesEveryWorkspaceModule(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, u := range work.Use {
		used = append(used, filepath.Clean(u.Path))
	}
	mk, err := makeVar(root, "MODULES")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, m := range strings.Fields(mk) {
		named = append(named, filepath.Clean(m))
	}
	slices.Sort(used)
	slices.Sort(named)
	if !slices.Equal(used, named) {
		t.Errorf("go.work uses %q, the Makefile's MODULES are %q: keep them equal", used, named)
	}
}

// The product's module requires neither the image builder's registry client
// nor what comes with it: a user who imports or scans elasti's module gets
// only what the operator, resolver, plugin and code generation use.
func TestProductModuleLacksBuildTools(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := modfile.Parse("go.mod", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range mod.Require {
		for _, banned := range []string{"github.com/google/go-containerregistry", "github.com/docker/"} {
			if strings.HasPrefix(r.Mod.Path, banned) {
				t.Errorf("go.mod requires %s %s; it belongs to hack/images' or test/'s module", r.Mod.Path, r.Mod.Version)
			}
		}
	}
}

// The binaries link the same module versions in the workspace (make build,
// make images) as from go.mod alone (the Dockerfile, which copies no
// go.work): a test bed's requirement that raised a shared dependency would
// otherwise ship in one build and not the other. `go work sync` writes the
// workspace's versions back into go.mod.
func TestWorkspaceBuildsTheProductAtGoModVersions(t *testing.T) {
	list := func(env ...string) string {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "./cmd/...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v", env, err)
		}
		lines := slices.Compact(slices.Sorted(slices.Values(strings.Split(strings.TrimSpace(string(out)), "\n"))))
		return strings.Join(lines, "\n")
	}
	inWorkspace, alone := list(), list("GOWORK=off")
	if inWorkspace != alone {
		t.Errorf("./cmd/... links other versions in the workspace than from go.mod alone; run go work sync\nworkspace:\n%s\ngo.mod alone:\n%s", inWorkspace, alone)
	}
}
