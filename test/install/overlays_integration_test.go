package install_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/elasti-dev/elasti/test/install"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// The objects the overlays change, as the base names them.
const (
	overlayOperatorDeployment = "elasti-operator-controller-manager"
	overlayResolverDeployment = "elasti-resolver"
	overlayOperatorSA         = "elasti-operator"
	overlayElastiNamespace    = "elasti"
	// The namespace deploy/overlays/namespace-scoped watches by default.
	overlayWatchNamespace = "apps"
)

// renderedObject is one object of `kubectl kustomize` output.
type renderedObject struct {
	Kind, Namespace, Name string
	Raw                   []byte
}

func (o renderedObject) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// into decodes the object into a typed value.
func (o renderedObject) into(t *testing.T, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.Raw, v); err != nil {
		t.Fatalf("%s: %v\n%s", o, err, o.Raw)
	}
}

type renderedObjects []renderedObject

func (objs renderedObjects) find(kind, namespace, name string) (renderedObject, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Namespace == namespace && o.Name == name {
			return o, true
		}
	}
	return renderedObject{}, false
}

func (objs renderedObjects) get(t *testing.T, kind, namespace, name string) renderedObject {
	t.Helper()
	o, ok := objs.find(kind, namespace, name)
	if !ok {
		t.Fatalf("the rendered output has no %s %s/%s; it has:\n%s", kind, namespace, name, objs.list())
	}
	return o
}

func (objs renderedObjects) ofKind(kind string) renderedObjects {
	var out renderedObjects
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (objs renderedObjects) list() string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "  %s\n", o)
	}
	return b.String()
}

func repoPath(t *testing.T, rel ...string) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, rel...)...)
}

// kustomize runs the cluster's kubectl (v1.36, kustomize built in) on dir
// and parses its output. Anything on stderr, such as a deprecation warning,
// fails the test.
func kustomize(t *testing.T, dir string) renderedObjects {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(clustertest.Get(t).BinDir, "kubectl"), "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.Bytes())
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("kubectl kustomize %s wrote to stderr:\n%s", dir, s)
	}
	return parseObjects(t, dir, stdout.Bytes())
}

func parseObjects(t *testing.T, source string, data []byte) renderedObjects {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs renderedObjects
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v\n%s", source, err, doc)
		}
		if m.Kind == "" {
			continue
		}
		objs = append(objs, renderedObject{Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Raw: doc})
	}
	if len(objs) == 0 {
		t.Fatalf("%s renders no objects", source)
	}
	return objs
}

// dryRunApplyKustomization runs `kubectl apply -k dir --dry-run=server`, as
// a user would without the dry run.
func dryRunApplyKustomization(t *testing.T, dir string) {
	t.Helper()
	c := clustertest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Namespaced objects can only be dry-run into a namespace that exists.
	if _, err := c.Kubectl(ctx, "apply", "-f", repoPath(t, "manifests", "00-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	out, err := c.Kubectl(ctx, "apply", "-k", dir, "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("(server dry run)")) {
		t.Errorf("kubectl did not report a server dry run:\n%s", out)
	}
}

// ensureNamespace creates a namespace shared by tests (and test runs), and
// leaves it in place so a rerun against the same cluster never meets it
// terminating.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := clustertest.Clientset(t).CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return corev1.Container{}
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

// manifests/Kustomization makes manifests/ a kustomize base without breaking
// `kubectl apply -f manifests/`: it must list exactly the manifests there.
func TestManifestsKustomizationListsEveryManifest(t *testing.T) {
	data, err := os.ReadFile(repoPath(t, "manifests", "Kustomization"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(repoPath(t, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, p := range paths {
		files = append(files, filepath.Base(p))
	}
	listed := slices.Clone(k.Resources)
	sort.Strings(listed)
	sort.Strings(files)
	if !slices.Equal(listed, files) {
		t.Fatalf("manifests/Kustomization lists %v, but manifests/ holds %v; keep them in step", k.Resources, files)
	}
	for _, name := range []string{"kustomization.yaml", "kustomization.yml"} {
		if _, err := os.Stat(repoPath(t, "manifests", name)); err == nil {
			t.Errorf("manifests/%s exists: kubectl apply -f manifests/ would read it as a resource, and kustomize refuses two kustomization files", name)
		}
	}

	// The base renders the same objects as the files do.
	var want []string
	for _, f := range files {
		raw, err := os.ReadFile(repoPath(t, "manifests", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range parseObjects(t, f, raw) {
			want = append(want, o.String())
		}
	}
	var got []string
	for _, o := range kustomize(t, repoPath(t, "manifests")) {
		got = append(got, o.String())
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("kubectl kustomize manifests renders\n%v\nbut the manifests hold\n%v", got, want)
	}
}

// The plain install ignores manifests/Kustomization.
func TestPlainManifestsStillApplyBesideKustomization(t *testing.T) {
	c := clustertest.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "apply", "-f", repoPath(t, "manifests", "00-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	out, err := c.Kubectl(ctx, "apply", "-f", repoPath(t, "manifests"), "--dry-run=server")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("(server dry run)")) || bytes.Contains(out, []byte("Kustomization")) {
		t.Errorf("unexpected output of kubectl apply -f manifests/:\n%s", out)
	}
}

func TestHAOverlay(t *testing.T) {
	dir := repoPath(t, "deploy", "overlays", "ha")
	objs := kustomize(t, dir)

	var op appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	if op.Spec.Replicas == nil || *op.Spec.Replicas != 2 {
		t.Errorf("operator replicas = %v, want 2", op.Spec.Replicas)
	}
	if args := container(t, &op, "manager").Args; !slices.Contains(args, "--leader-elect") {
		t.Errorf("operator args %v lack --leader-elect; two replicas would both act", args)
	}
	// Only the leader is Ready, so a rolling update could never finish.
	if op.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || op.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("operator strategy = %+v, want Recreate", op.Spec.Strategy)
	}
	podLabels := op.Spec.Template.Labels
	aff := op.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Fatalf("operator has no required podAntiAffinity: %+v", aff)
	}
	spread := false
	for _, term := range aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey == corev1.LabelHostname && selects(t, term.LabelSelector, podLabels) {
			spread = true
		}
	}
	if !spread {
		t.Errorf("no required anti-affinity term keeps operator pods %v on different hosts: %+v", podLabels, aff.PodAntiAffinity)
	}

	var res appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayResolverDeployment).into(t, &res)
	if res.Spec.Replicas == nil || *res.Spec.Replicas != 3 {
		t.Errorf("resolver replicas = %v, want 3", res.Spec.Replicas)
	}
	if a := res.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil ||
		len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution)+len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		t.Errorf("resolver lost its podAntiAffinity: %+v", a)
	}

	pdbs := objs.ofKind("PodDisruptionBudget")
	resolverCovered := false
	for _, o := range pdbs {
		var pdb policyv1.PodDisruptionBudget
		o.into(t, &pdb)
		if pdb.Namespace != overlayElastiNamespace {
			t.Errorf("%s is not in namespace %s", o, overlayElastiNamespace)
		}
		if selects(t, pdb.Spec.Selector, res.Spec.Template.Labels) {
			resolverCovered = true
			// At most one of three resolver pods goes at a time.
			if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) {
				t.Errorf("%s: maxUnavailable = %v, want 1", o, pdb.Spec.MaxUnavailable)
			}
		}
		// Only the leader is Ready: a budget over operator pods would forbid
		// evicting the leader, and draining its node would never finish.
		if selects(t, pdb.Spec.Selector, podLabels) {
			t.Errorf("%s selects operator pods; with leader-only readiness it blocks draining the leader's node", o)
		}
	}
	if !resolverCovered {
		t.Errorf("no PodDisruptionBudget selects the resolver pods %v; PDBs:\n%s", res.Spec.Template.Labels, pdbs.list())
	}

	dryRunApplyKustomization(t, dir)
}

// operatorBindings returns the roles, by kind/namespace/name, that the
// rendered RoleBindings and ClusterRoleBindings grant the operator.
func operatorBindings(t *testing.T, objs renderedObjects) (crbs []rbacv1.ClusterRoleBinding, rbs []rbacv1.RoleBinding) {
	t.Helper()
	isOperator := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == overlayOperatorSA && s.Namespace == overlayElastiNamespace
		})
	}
	for _, o := range objs.ofKind("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		o.into(t, &b)
		if isOperator(b.Subjects) {
			crbs = append(crbs, b)
		}
	}
	for _, o := range objs.ofKind("RoleBinding") {
		var b rbacv1.RoleBinding
		o.into(t, &b)
		if isOperator(b.Subjects) {
			rbs = append(rbs, b)
		}
	}
	return crbs, rbs
}

func TestNamespaceScopedOverlay(t *testing.T) {
	dir := repoPath(t, "deploy", "overlays", "namespace-scoped")
	objs := kustomize(t, dir)

	var op appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	args := container(t, &op, "manager").Args
	if !slices.Contains(args, "--watch-namespace="+overlayWatchNamespace) {
		t.Errorf("operator args %v lack --watch-namespace=%s", args, overlayWatchNamespace)
	}
	for _, a := range []string{"--leader-elect", "--metrics-bind-address=:8080"} {
		if !slices.Contains(args, a) {
			t.Errorf("operator args %v lost the base's %s", args, a)
		}
	}
	if _, ok := objs.find("ConfigMap", "", "elasti-watch-namespace"); ok {
		t.Error("the local-config ConfigMap elasti-watch-namespace is rendered; it must only carry the value")
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if _, ok := objs.find(kind, "", "elasti-operator"); ok {
			t.Errorf("the base's cluster-wide %s elasti-operator is still rendered", kind)
		}
	}

	crbs, rbs := operatorBindings(t, objs)
	// Cluster-wide, the operator may only read CRDs.
	for _, b := range crbs {
		o := objs.get(t, "ClusterRole", "", b.RoleRef.Name)
		var role rbacv1.ClusterRole
		o.into(t, &role)
		for _, r := range role.Rules {
			if !slices.Equal(r.APIGroups, []string{"apiextensions.k8s.io"}) || !slices.Equal(r.Resources, []string{"customresourcedefinitions"}) {
				t.Errorf("ClusterRoleBinding %s grants the operator %v %v cluster-wide; only CRDs may be", b.Name, r.APIGroups, r.Resources)
			}
			for _, v := range r.Verbs {
				if v != "get" && v != "list" && v != "watch" {
					t.Errorf("ClusterRole %s lets the operator %s CRDs", role.Name, v)
				}
			}
		}
	}
	// Per namespace: the watched one gets the working set, elasti gets the
	// Lease and the resolver's slices.
	granted := map[string][]rbacv1.PolicyRule{}
	for _, b := range rbs {
		if b.RoleRef.Kind != "Role" {
			t.Errorf("RoleBinding %s/%s refers to a %s; want a Role", b.Namespace, b.Name, b.RoleRef.Kind)
			continue
		}
		var role rbacv1.Role
		objs.get(t, "Role", b.Namespace, b.RoleRef.Name).into(t, &role)
		granted[b.Namespace] = append(granted[b.Namespace], role.Rules...)
	}
	allows := func(ns, group, resource, verb string) bool {
		return slices.ContainsFunc(granted[ns], func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
		})
	}
	for _, want := range []struct{ ns, group, resource, verb string }{
		{overlayWatchNamespace, "elasti.truefoundry.com", "elastiservices", "watch"},
		{overlayWatchNamespace, "elasti.truefoundry.com", "elastiservices/status", "update"},
		{overlayWatchNamespace, "", "services", "create"},
		{overlayWatchNamespace, "discovery.k8s.io", "endpointslices", "create"},
		{overlayWatchNamespace, "apps", "deployments", "watch"},
		{overlayWatchNamespace, "apps", "statefulsets/scale", "patch"},
		{overlayWatchNamespace, "argoproj.io", "rollouts", "watch"},
		{overlayWatchNamespace, "keda.sh", "scaledobjects", "patch"},
		{overlayWatchNamespace, "autoscaling", "horizontalpodautoscalers", "watch"},
		{overlayWatchNamespace, "", "events", "create"},
		{overlayElastiNamespace, "coordination.k8s.io", "leases", "update"},
		{overlayElastiNamespace, "discovery.k8s.io", "endpointslices", "watch"},
	} {
		if !allows(want.ns, want.group, want.resource, want.verb) {
			t.Errorf("no Role bound to the operator in %s allows %s %s.%s", want.ns, want.verb, want.resource, want.group)
		}
	}
	for _, deny := range []struct{ group, resource, verb string }{
		{"discovery.k8s.io", "endpointslices", "create"},
		{"", "services", "list"},
	} {
		if allows(overlayElastiNamespace, deny.group, deny.resource, deny.verb) {
			t.Errorf("the operator may %s %s in %s; it only reads the resolver's slices there", deny.verb, deny.resource, overlayElastiNamespace)
		}
	}

	assertRulesCommented(t, filepath.Join(dir, "rbac.yaml"))

	ensureNamespace(t, overlayWatchNamespace)
	dryRunApplyKustomization(t, dir)
}

// assertRulesCommented checks that every RBAC rule in a file has a comment
// right above it saying why it exists.
func assertRulesCommented(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	rules := 0
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "- apiGroups:") {
			continue
		}
		rules++
		if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
			t.Errorf("%s:%d: rule without a comment saying why it exists", path, i+1)
		}
	}
	if rules == 0 {
		t.Errorf("%s has no rules", path)
	}
}

// readmeOverlay extracts the example overlay that deploy/README.md gives for
// watching another namespace: the yaml block whose first line is marker.
func readmeOverlay(t *testing.T, marker string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)```yaml\n(" + regexp.QuoteMeta(marker) + "\n.*?)```")
	m := re.FindSubmatch(data)
	if m == nil {
		t.Fatalf("deploy/README.md has no yaml block starting with %q", marker)
	}
	return string(m[1])
}

// The README's recipe for watching another namespace works, and the
// resulting RBAC lets the operator do its work there and nothing outside it.
func TestNamespaceScopedOverlayOtherNamespaceRBAC(t *testing.T) {
	watched := clustertest.Namespace(t)
	overlay := repoPath(t, "deploy", "overlays", "namespace-scoped")
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, overlay)
	if err != nil {
		t.Fatal(err)
	}
	const readmeBase, readmeNamespace = "../elasti/deploy/overlays/namespace-scoped", "team-a"
	k := readmeOverlay(t, "# my-elasti/kustomization.yaml")
	if !strings.Contains(k, readmeBase) || !strings.Contains(k, "value: "+readmeNamespace) {
		t.Fatalf("the README's overlay no longer uses %s and namespace %s:\n%s", readmeBase, readmeNamespace, k)
	}
	k = strings.ReplaceAll(k, readmeBase, filepath.ToSlash(rel))
	k = strings.ReplaceAll(k, "value: "+readmeNamespace, "value: "+watched)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := kustomize(t, dir)

	var op appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	if args := container(t, &op, "manager").Args; !slices.Contains(args, "--watch-namespace="+watched) {
		t.Fatalf("operator args %v lack --watch-namespace=%s", args, watched)
	}
	objs.get(t, "Role", watched, "elasti-operator")
	objs.get(t, "RoleBinding", watched, "elasti-operator")
	for _, o := range objs {
		if o.Namespace == overlayWatchNamespace {
			t.Errorf("%s is still in the default watched namespace", o)
		}
	}

	// Create the operator's roles under unique names, bound to a unique user
	// instead of the ServiceAccount (other tests bind the base's ClusterRole
	// to it), and act as that user.
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := "-" + hex.EncodeToString(b)
	user := "elasti-ns-scoped" + suffix
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	admin := clustertest.Clientset(t)
	ctx := context.Background()
	ensureNamespace(t, overlayElastiNamespace)
	crbs, rbs := operatorBindings(t, objs)
	if len(crbs) == 0 || len(rbs) == 0 {
		t.Fatalf("the operator has %d ClusterRoleBindings and %d RoleBindings; want both", len(crbs), len(rbs))
	}
	for _, crb := range crbs {
		var role rbacv1.ClusterRole
		objs.get(t, "ClusterRole", "", crb.RoleRef.Name).into(t, &role)
		role.Name += suffix
		role.ResourceVersion = ""
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
		nb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: crb.Name + suffix},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   subjects,
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), nb.Name, metav1.DeleteOptions{})
		})
	}
	for _, rb := range rbs {
		var role rbacv1.Role
		objs.get(t, "Role", rb.Namespace, rb.RoleRef.Name).into(t, &role)
		role.Name += suffix
		if _, err := admin.RbacV1().Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().Roles(role.Namespace).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		})
		nb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: rb.Name + suffix, Namespace: rb.Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   subjects,
		}
		if _, err := admin.RbacV1().RoleBindings(nb.Namespace).Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.RbacV1().RoleBindings(nb.Namespace).Delete(context.Background(), nb.Name, metav1.DeleteOptions{})
		})
	}

	cfg := clustertest.Get(t).RESTConfig()
	cfg.Impersonate.UserName = user
	kube := kubernetes.NewForConfigOrDie(cfg)
	apiext := apiextensionsclient.NewForConfigOrDie(cfg)
	list := metav1.ListOptions{}
	rolloutCRD := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "rollouts.argoproj.io").String()}
	resolverSlices := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=elasti-resolver-service"}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: "elasti-test-", Namespace: overlayElastiNamespace},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	type check struct {
		what string
		call func(context.Context) error
	}
	allowed := []check{
		{"list services in the watched namespace", func(ctx context.Context) error {
			_, err := kube.CoreV1().Services(watched).List(ctx, list)
			return err
		}},
		{"list endpointslices in the watched namespace", func(ctx context.Context) error {
			_, err := kube.DiscoveryV1().EndpointSlices(watched).List(ctx, list)
			return err
		}},
		{"list deployments in the watched namespace", func(ctx context.Context) error {
			_, err := kube.AppsV1().Deployments(watched).List(ctx, list)
			return err
		}},
		{"list statefulsets in the watched namespace", func(ctx context.Context) error {
			_, err := kube.AppsV1().StatefulSets(watched).List(ctx, list)
			return err
		}},
		{"list the resolver's endpointslices in elasti", func(ctx context.Context) error {
			_, err := kube.DiscoveryV1().EndpointSlices(overlayElastiNamespace).List(ctx, resolverSlices)
			return err
		}},
		{"get the leader-election Lease", func(ctx context.Context) error {
			_, err := kube.CoordinationV1().Leases(overlayElastiNamespace).Get(ctx, "elasti-operator-leader", metav1.GetOptions{})
			return err
		}},
		{"list the Rollout CRD by name", func(ctx context.Context) error {
			_, err := apiext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, rolloutCRD)
			return err
		}},
		{"get the Rollout CRD", func(ctx context.Context) error {
			_, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "rollouts.argoproj.io", metav1.GetOptions{})
			return err
		}},
	}
	forbidden := []check{
		{"list services in all namespaces", func(ctx context.Context) error {
			_, err := kube.CoreV1().Services("").List(ctx, list)
			return err
		}},
		{"list services in default", func(ctx context.Context) error {
			_, err := kube.CoreV1().Services("default").List(ctx, list)
			return err
		}},
		{"list endpointslices in all namespaces", func(ctx context.Context) error {
			_, err := kube.DiscoveryV1().EndpointSlices("").List(ctx, list)
			return err
		}},
		{"list deployments in default", func(ctx context.Context) error {
			_, err := kube.AppsV1().Deployments("default").List(ctx, list)
			return err
		}},
		{"list services in elasti", func(ctx context.Context) error {
			_, err := kube.CoreV1().Services(overlayElastiNamespace).List(ctx, list)
			return err
		}},
		{"create an endpointslice in elasti", func(ctx context.Context) error {
			_, err := kube.DiscoveryV1().EndpointSlices(overlayElastiNamespace).Create(ctx, slice, dryRun)
			return err
		}},
		{"list secrets in the watched namespace", func(ctx context.Context) error {
			_, err := kube.CoreV1().Secrets(watched).List(ctx, list)
			return err
		}},
		{"list every CRD", func(ctx context.Context) error {
			_, err := apiext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, list)
			return err
		}},
		{"get the ElastiService CRD", func(ctx context.Context) error {
			_, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "elastiservices.elasti.truefoundry.com", metav1.GetOptions{})
			return err
		}},
	}
	// New bindings take a moment to reach the authorizer.
	for _, c := range allowed {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			last = c.call(ctx)
			return last == nil || apierrors.IsNotFound(last), nil
		})
		if err != nil {
			t.Errorf("%s: %v, want it allowed", c.what, last)
		}
	}
	for _, c := range forbidden {
		if err := c.call(ctx); !apierrors.IsForbidden(err) {
			t.Errorf("%s: err %v, want Forbidden", c.what, err)
		}
	}
}

// serviceMonitorCRD is a minimal stand-in for the Prometheus Operator's CRD.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}
}

// serviceMonitor is the part of a ServiceMonitor the overlay sets.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// grafanaDashboard is the part of a dashboard the test reads.
type grafanaDashboard struct {
	Title  string         `json:"title"`
	UID    string         `json:"uid"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func TestMonitoringOverlay(t *testing.T) {
	dir := repoPath(t, "deploy", "overlays", "monitoring")
	objs := kustomize(t, dir)

	// Each ServiceMonitor must reach a Service port that forwards to the
	// container port serving /metrics.
	var op, res appsv1.Deployment
	objs.get(t, "Deployment", overlayElastiNamespace, overlayOperatorDeployment).into(t, &op)
	objs.get(t, "Deployment", overlayElastiNamespace, overlayResolverDeployment).into(t, &res)
	metricsPort := map[string]int32{"elasti-operator": 8080, "elasti-resolver": 8013}
	if args := container(t, &op, "manager").Args; !slices.Contains(args, "--metrics-bind-address=:8080") {
		t.Errorf("operator args %v: the ServiceMonitor expects /metrics on :8080", args)
	}
	if !slices.ContainsFunc(container(t, &res, "resolver").Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 8013 }) {
		t.Error("the resolver container does not expose 8013, where it serves /metrics")
	}
	sms := objs.ofKind("ServiceMonitor")
	if len(sms) != 2 {
		t.Fatalf("%d ServiceMonitors, want 2:\n%s", len(sms), sms.list())
	}
	services := objs.ofKind("Service")
	for name, port := range metricsPort {
		var sm serviceMonitor
		objs.get(t, "ServiceMonitor", overlayElastiNamespace, name).into(t, &sm)
		if sm.APIVersion != "monitoring.coreos.com/v1" {
			t.Errorf("ServiceMonitor %s: apiVersion %s", name, sm.APIVersion)
		}
		if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{overlayElastiNamespace}) {
			t.Errorf("ServiceMonitor %s looks in namespaces %v, want [%s]", name, sm.Spec.NamespaceSelector.MatchNames, overlayElastiNamespace)
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Fatalf("ServiceMonitor %s endpoints %+v, want one with path /metrics", name, sm.Spec.Endpoints)
		}
		reached := 0
		for _, o := range services {
			var svc corev1.Service
			o.into(t, &svc)
			if svc.Namespace != overlayElastiNamespace || !selects(t, &sm.Spec.Selector, svc.Labels) {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.Name != sm.Spec.Endpoints[0].Port {
					continue
				}
				reached++
				if p.TargetPort.IntVal != port {
					t.Errorf("ServiceMonitor %s scrapes Service %s port %s -> %s, want target port %d", name, svc.Name, p.Name, p.TargetPort.String(), port)
				}
			}
		}
		if reached != 1 {
			t.Errorf("ServiceMonitor %s reaches %d Service ports named %q, want 1", name, reached, sm.Spec.Endpoints[0].Port)
		}
	}

	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap", overlayElastiNamespace, "elasti-grafana-dashboard").into(t, &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
	}
	if len(cm.Data) != 1 {
		t.Fatalf("dashboard ConfigMap has keys %v, want one dashboard", slices.Sorted(maps.Keys(cm.Data)))
	}
	source, err := os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	for key, text := range cm.Data {
		if !strings.HasSuffix(key, ".json") {
			t.Errorf("dashboard key %q does not end in .json", key)
		}
		if text != string(source) {
			t.Errorf("the ConfigMap's %s differs from dashboard.json", key)
		}
		checkDashboard(t, []byte(text))
	}

	c := clustertest.Get(t)
	cfg := c.RESTConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := install.ApplyCRDs(ctx, cfg, serviceMonitorCRD()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions().
			Delete(context.Background(), "servicemonitors.monitoring.coreos.com", metav1.DeleteOptions{})
	})
	dryRunApplyKustomization(t, dir)
}

func checkDashboard(t *testing.T, data []byte) {
	t.Helper()
	var d grafanaDashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard title %q uid %q; both are needed for a stable import", d.Title, d.UID)
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is outside the 24-column grid: %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Datasource == nil || len(p.Targets) == 0 {
			t.Errorf("panel %d (%q) needs a title, a data source and at least one query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q has a query without expr or refId", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		"sum by (direction, result) (rate(elasti_operator_scale_counter[5m]))",
		"histogram_quantile(0.5, sum by (le) (rate(elasti_operator_scale_request_duration_seconds_bucket[5m])))",
		"histogram_quantile(0.9, sum by (le) (rate(elasti_operator_scale_request_duration_seconds_bucket[5m])))",
		"sum by (outcome) (rate(elasti_operator_scale_to_zero_evaluations_total[5m]))",
		`sum by (reason) (rate(elasti_operator_scale_to_zero_evaluations_total{outcome="trigger_error"}[5m]))`,
		"time() - max(elasti_operator_poller_last_run_timestamp_seconds)",
		"sum(elasti_operator_mode)",
		"elasti_operator_reconcile_bucket",
		`workqueue_depth{name=~"elastiservice|scaletarget|endpointslice|privateservice"}`,
		"rate(workqueue_retries_total[5m])",
		"sum by (code) (rate(rest_client_requests_total[5m]))",
		"elasti_operator_cold_start_seconds_bucket",
		"elasti_resolver_queued_requests",
		"sum by (code_class) (rate(elasti_resolver_proxied_requests_total[5m]))",
		"elasti_resolver_cold_start_wait_seconds_bucket",
		"rate(elasti_resolver_queue_overflow_total[5m])",
		"rate(elasti_resolver_queue_timeouts_total[5m])",
		"sum by (outcome) (rate(elasti_operator_scale_request_duration_seconds_count[5m]))",
		"max(elasti_operator_resolver_ports_in_use) / max(elasti_operator_resolver_ports_capacity)",
		"count by (binary, version) (elasti_build_info)",
		"sum by (protocol) (rate(elasti_resolver_wake_rate_limited_total[5m]))",
		"rate(elasti_resolver_pod_connect_failures_total[5m])",
		"sum by (outcome) (rate(elasti_resolver_spliced_connections_total[5m]))",
		// The sleep and savings row (#24): fleet totals without labels.
		"sum(elasti_operator_asleep_targets)",
		"sum(rate(elasti_operator_saved_pod_seconds_total[5m]))",
		"sum(increase(elasti_operator_saved_pod_seconds_total[24h])) / 3600",
		"sum(rate(elasti_operator_asleep_seconds_total[5m]))",
		"sum(increase(elasti_operator_wakes_total[24h]))",
		"elasti_operator_scale_up_to_ready_seconds_bucket",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no dashboard query contains %s", want)
		}
	}
}
