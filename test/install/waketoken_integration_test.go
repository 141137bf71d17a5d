package install_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/elasti-dev/elasti/pkg/waketoken"
)

// The Secret deploy/README.md tells users to create.
var readmeSecret = regexp.MustCompile(`kubectl -n (\S+) create secret generic (\S+) --from-literal=(\w+)=`)

// tokenFileOf returns where a container of d reads the wake token from:
// the Secret, its key, and whether the Secret is optional. It fails the
// test unless the environment variable the binaries read names a file in
// a read-only Secret volume.
func tokenFileOf(t *testing.T, d *appsv1.Deployment, name string) (secret, key string, optional bool) {
	t.Helper()
	c := container(t, d, name)
	var path string
	for _, e := range c.Env {
		if e.Name == waketoken.EnvFile {
			path = e.Value
		}
	}
	if path == "" {
		t.Fatalf("%s container %s does not set %s; env %+v", d.Name, name, waketoken.EnvFile, c.Env)
	}
	for _, m := range c.VolumeMounts {
		file, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("%s: the token volume %s is mounted writable", d.Name, m.Name)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.Secret == nil {
				t.Fatalf("%s: %s is in volume %s, which is not a Secret", d.Name, path, v.Name)
			}
			// Without items every key is a file of its own name.
			key = file
			if len(v.Secret.Items) > 0 {
				key = ""
				for _, item := range v.Secret.Items {
					if item.Path == file {
						key = item.Key
					}
				}
				if key == "" {
					t.Fatalf("%s: no item of Secret volume %s is mounted at %s", d.Name, v.Name, file)
				}
			}
			return v.Secret.SecretName, key, v.Secret.Optional != nil && *v.Secret.Optional
		}
		t.Fatalf("%s: volume %s is mounted but not defined", d.Name, m.Name)
	}
	t.Fatalf("%s: %s=%s is under no volume mount of container %s", d.Name, waketoken.EnvFile, path, name)
	return "", "", false
}

// checkWakeToken checks that the operator and the resolver read the same
// key of the same Secret, the one deploy/README.md has users create, and
// that a missing Secret keeps the pods from starting rather than starting
// them without a token.
func checkWakeToken(t *testing.T, objs renderedObjects) {
	t.Helper()
	var op, res appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	objs.get(t, "Deployment", overlayElastiNamespace, overlayResolverDeployment).into(t, &res)
	opSecret, opKey, opOptional := tokenFileOf(t, &op, "manager")
	resSecret, resKey, resOptional := tokenFileOf(t, &res, "resolver")
	if opSecret != resSecret || opKey != resKey {
		t.Errorf("the operator reads Secret %s key %s, the resolver Secret %s key %s; they must share one token", opSecret, opKey, resSecret, resKey)
	}
	if opOptional || resOptional {
		t.Error("the token Secret is optional: without it the pods would start without a token")
	}
	readme, err := os.ReadFile(repoPath(t, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := readmeSecret.FindSubmatch(readme)
	if m == nil {
		t.Fatal("deploy/README.md no longer shows how to create the token Secret")
	}
	if string(m[1]) != overlayElastiNamespace || string(m[2]) != opSecret || string(m[3]) != opKey {
		t.Errorf("deploy/README.md creates Secret %s/%s with key %s; the pods read %s/%s key %s",
			m[1], m[2], m[3], overlayElastiNamespace, opSecret, opKey)
	}
}

func TestWakeTokenOverlay(t *testing.T) {
	dir := repoPath(t, "deploy", "overlays", "wake-token")
	objs := kustomize(t, dir)
	checkWakeToken(t, objs)
	// Nothing else of the base changes.
	var op appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	if args := container(t, &op, "manager").Args; !strings.Contains(strings.Join(args, " "), "--leader-elect") {
		t.Errorf("operator args %v lost the base's --leader-elect", args)
	}
	if _, ok := objs.find("Secret", overlayElastiNamespace, "elasti-wake-token"); ok {
		t.Error("the overlay renders the token Secret; a committed token is no secret")
	}
	dryRunApplyKustomization(t, dir)
}

// The component adds the token to another overlay, as deploy/README.md
// shows for ha.
func TestWakeTokenComponentCombinesWithHA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-elasti-ha")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, repoPath(t))
	if err != nil {
		t.Fatal(err)
	}
	k := readmeOverlay(t, "# my-elasti-ha/kustomization.yaml")
	const readmeRoot = "../elasti/"
	if strings.Count(k, readmeRoot) != 2 {
		t.Fatalf("the README's overlay no longer refers to the checkout as %s twice:\n%s", readmeRoot, k)
	}
	k = strings.ReplaceAll(k, readmeRoot, filepath.ToSlash(rel)+"/")
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := kustomize(t, dir)
	checkWakeToken(t, objs)
	var op appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	if op.Spec.Replicas == nil || *op.Spec.Replicas != 2 {
		t.Errorf("operator replicas = %v; the ha overlay's 2 were lost", op.Spec.Replicas)
	}
	dryRunApplyKustomization(t, dir)
}
