package v1alpha1

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hack/verify-codegen.sh must catch a type edited without regenerating.
// The edit happens in a copy of the module, never in the working tree.
func TestVerifyCodegenCatchesAnUnregeneratedTypeEdit(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	copyTree := t.TempDir()
	for _, p := range []string{"go.mod", "go.sum", "hack", "pkg"} {
		if out, err := exec.Command("cp", "-a", filepath.Join(root, p), copyTree).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", p, err, out)
		}
	}
	verify := func() (string, error) {
		cmd := exec.Command("bash", filepath.Join(copyTree, "hack", "verify-codegen.sh"))
		cmd.Dir = copyTree
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil {
		t.Fatalf("verify-codegen.sh fails on the unedited tree: %v\n%s", err, out)
	}

	typesFile := filepath.Join(copyTree, "pkg", "apis", "elasti", "v1alpha1", "types.go")
	src, err := os.ReadFile(typesFile)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src),
		"type AutoscalerSpec struct {\n",
		"type AutoscalerSpec struct {\n\tLabels map[string]string `json:\"labels,omitempty\"`\n", 1)
	if edited == string(src) {
		t.Fatal("the edit did not apply; update the test to the current AutoscalerSpec")
	}
	if err := os.WriteFile(typesFile, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := verify()
	if err == nil {
		t.Fatalf("verify-codegen.sh passed after a type edit without regeneration:\n%s", out)
	}
	if !strings.Contains(out, "out of date") || !strings.Contains(out, "zz_generated.deepcopy.go") {
		t.Errorf("verify-codegen.sh failed without naming the stale deepcopy:\n%s", out)
	}
}
