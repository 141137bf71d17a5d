package install_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

const (
	operatorNamespace      = "elasti"
	operatorServiceAccount = "elasti-operator"
)

// applyManifests runs `kubectl apply -f manifests/` for real, as a user would.
func applyManifests(t *testing.T) {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := clustertest.Get(t).Kubectl(ctx, "apply", "-f", filepath.Join(root, "manifests")); err != nil {
		t.Fatal(err)
	}
}

func TestManifestsApplyWithServerDryRun(t *testing.T) {
	c := clustertest.Get(t)
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Namespaced objects can only be dry-run into a namespace that exists.
	if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(root, "manifests", "00-namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	out, err := c.Kubectl(ctx, "apply", "--dry-run=server", "-f", filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("(server dry run)")) {
		t.Errorf("kubectl did not report a server dry run:\n%s", out)
	}
	applyManifests(t)
}

type access struct {
	group, resource, subresource, verb, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	if a.namespace != "" {
		r += " in " + a.namespace
	}
	return a.verb + " " + r
}

// The operator's roles, bound to the unprivileged test user, grant every
// rule they list and nothing else that matters.
func TestOperatorRBACIsLeastPrivilege(t *testing.T) {
	applyManifests(t)
	c := clustertest.Get(t)
	admin := clustertest.Clientset(t)
	user := kubernetes.NewForConfigOrDie(c.UnprivilegedRESTConfig())
	ctx := context.Background()

	if _, err := user.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before any binding the unprivileged user listed services (err %v); the test user must start with no rights", err)
	}

	granted := bindOperatorRolesTo(t, admin, localcluster.UnprivilegedUser)
	if len(granted) == 0 {
		t.Fatal("manifests/ bind no role to the operator's ServiceAccount")
	}
	for _, a := range granted {
		waitAllowed(t, user, a, true)
	}

	// Things the operator never does must stay forbidden.
	for _, a := range []access{
		{resource: "secrets", verb: "get", namespace: "default"},
		{resource: "secrets", verb: "list"},
		{resource: "configmaps", verb: "create", namespace: "default"},
		{resource: "pods", verb: "delete", namespace: "default"},
		{resource: "pods", verb: "create", namespace: "default"},
		{resource: "nodes", verb: "list"},
		{resource: "namespaces", verb: "delete"},
		{group: "apps", resource: "deployments", verb: "delete", namespace: "default"},
		{group: "apps", resource: "deployments", verb: "create", namespace: "default"},
		{group: "apps", resource: "deployments", verb: "update", namespace: "default"},
		{group: "apps", resource: "statefulsets", verb: "patch", namespace: "default"},
		// It reads the HPA spec.autoscaler names, and never writes one.
		{group: "autoscaling", resource: "horizontalpodautoscalers", verb: "update", namespace: "default"},
		{group: "autoscaling", resource: "horizontalpodautoscalers", verb: "patch", namespace: "default"},
		{group: "autoscaling", resource: "horizontalpodautoscalers", verb: "create", namespace: "default"},
		{group: "elasti.truefoundry.com", resource: "elastiservices", verb: "delete", namespace: "default"},
		{group: "elasti.truefoundry.com", resource: "elastiservices", verb: "create", namespace: "default"},
		{group: "apiextensions.k8s.io", resource: "customresourcedefinitions", verb: "create"},
		{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "create"},
		{group: "coordination.k8s.io", resource: "leases", verb: "update", namespace: "default"},
	} {
		waitAllowed(t, user, a, false)
	}
	// And a real request is refused, not just the review.
	if _, err := user.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets as the operator: err %v, want Forbidden", err)
	}
}

// bindOperatorRolesTo binds every role the manifests bind to the operator's
// ServiceAccount to user as well, and returns each access those roles grant.
func bindOperatorRolesTo(t *testing.T, cs kubernetes.Interface, user string) []access {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := map[string]rbacv1.ClusterRole{}
	roles := map[string]rbacv1.Role{}
	var crbs []rbacv1.ClusterRoleBinding
	var rbs []rbacv1.RoleBinding
	for _, p := range paths {
		for _, doc := range splitYAML(t, p) {
			var meta metav1.TypeMeta
			decode(t, doc, &meta)
			switch meta.Kind {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				decode(t, doc, &r)
				clusterRoles[r.Name] = r
			case "Role":
				var r rbacv1.Role
				decode(t, doc, &r)
				roles[r.Namespace+"/"+r.Name] = r
			case "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				decode(t, doc, &b)
				crbs = append(crbs, b)
			case "RoleBinding":
				var b rbacv1.RoleBinding
				decode(t, doc, &b)
				rbs = append(rbs, b)
			}
		}
	}
	isOperator := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == "ServiceAccount" && s.Name == operatorServiceAccount && s.Namespace == operatorNamespace {
				return true
			}
		}
		return false
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	ctx := context.Background()
	var granted []access
	for _, b := range crbs {
		if !isOperator(b.Subjects) {
			continue
		}
		role, ok := clusterRoles[b.RoleRef.Name]
		if !ok {
			t.Fatalf("ClusterRoleBinding %s refers to ClusterRole %s, which manifests/ does not define", b.Name, b.RoleRef.Name)
		}
		nb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-" + b.Name}, RoleRef: b.RoleRef, Subjects: subject}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), nb.Name, metav1.DeleteOptions{})
		})
		granted = append(granted, expand(role.Rules, "")...)
	}
	for _, b := range rbs {
		if !isOperator(b.Subjects) {
			continue
		}
		if b.RoleRef.Kind != "Role" {
			t.Fatalf("RoleBinding %s/%s: only Role refs are expected, got %s", b.Namespace, b.Name, b.RoleRef.Kind)
		}
		role, ok := roles[b.Namespace+"/"+b.RoleRef.Name]
		if !ok {
			t.Fatalf("RoleBinding %s/%s refers to Role %s, which manifests/ does not define", b.Namespace, b.Name, b.RoleRef.Name)
		}
		nb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-" + b.Name, Namespace: b.Namespace}, RoleRef: b.RoleRef, Subjects: subject}
		if _, err := cs.RbacV1().RoleBindings(b.Namespace).Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.RbacV1().RoleBindings(nb.Namespace).Delete(context.Background(), nb.Name, metav1.DeleteOptions{})
		})
		granted = append(granted, expand(role.Rules, b.Namespace)...)
	}
	return granted
}

func expand(rules []rbacv1.PolicyRule, namespace string) []access {
	var out []access
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					a := access{group: g, resource: res, verb: v, namespace: namespace}
					if i := bytes.IndexByte([]byte(res), '/'); i >= 0 {
						a.resource, a.subresource = res[:i], res[i+1:]
					}
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// waitAllowed asks the apiserver, as the user, whether a is allowed; RBAC
// bindings take a moment to reach the authorizer's cache.
func waitAllowed(t *testing.T, user kubernetes.Interface, a access, want bool) {
	t.Helper()
	var last bool
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb, Namespace: a.namespace,
			},
		}}
		res, err := user.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		last = res.Status.Allowed
		return last == want, nil
	})
	if err != nil {
		t.Errorf("%s: allowed=%v, want %v (%v)", a, last, want, err)
	}
}

func splitYAML(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufioReader(data))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

func decode(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := utilyaml.Unmarshal(doc, into); err != nil {
		t.Fatalf("decode %T: %v", into, fmt.Errorf("%w\n%s", err, doc))
	}
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
