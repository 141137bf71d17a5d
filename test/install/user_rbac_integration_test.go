package install_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
)

// Namespace users get ElastiServices through the built-in roles, by the
// aggregated elasti-edit and elasti-view ClusterRoles: a user bound to
// `edit` in a namespace creates, reads and deletes one there and not in
// another namespace; a user bound to `view` reads it and cannot create,
// change or delete one, nor write its status.
func TestBuiltInEditAndViewRolesCoverElastiServices(t *testing.T) {
	applyManifests(t)
	c := clustertest.Get(t)
	admin := clustertest.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, name := range []string{"elasti-edit", "elasti-view"} {
		role, err := admin.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("ClusterRole %s: %v", name, err)
		}
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" || role.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" {
			t.Errorf("ClusterRole %s labels %v; want it aggregated to edit and admin", name, role.Labels)
		}
	}

	var namespaces []string
	for _, prefix := range []string{"tenant-a-", "tenant-b-"} {
		ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
		namespaces = append(namespaces, ns.Name)
	}
	tenant, other := namespaces[0], namespaces[1]
	for user, role := range map[string]string{"tenant-editor": "edit", "tenant-viewer": "view"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: tenant},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if _, err := admin.RbacV1().RoleBindings(tenant).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Users by impersonation: the admin may act as any user name, and the
	// apiserver authorizes the request as that user.
	as := func(user string) versioned.Interface {
		cfg := rest.CopyConfig(c.RESTConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		return versioned.NewForConfigOrDie(cfg)
	}
	editor, viewer := as("tenant-editor"), as("tenant-viewer")
	es := func(name string) *elastiv1alpha1.ElastiService {
		return &elastiv1alpha1.ElastiService{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: elastiv1alpha1.ElastiServiceSpec{
				Service:        "web",
				ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{APIVersion: elastiv1alpha1.APIVersionApps, Kind: elastiv1alpha1.KindDeployment, Name: "web"},
			},
		}
	}

	// The aggregation controller fills edit and view a moment after the
	// ClusterRoles appear, and the authorizer's cache a moment after that.
	var created *elastiv1alpha1.ElastiService
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, last = editor.ElastiV1alpha1().ElastiServices(tenant).Create(ctx, es("web"), metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("a user bound to edit could not create an ElastiService in %s: %v (last: %v)", tenant, err, last)
	}
	if _, err := editor.ElastiV1alpha1().ElastiServices(tenant).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("editor list: %v", err)
	}
	if _, err := editor.ElastiV1alpha1().ElastiServices(tenant).UpdateStatus(ctx, created, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("editor wrote the status: err %v, want Forbidden; the status is the operator's", err)
	}
	if _, err := editor.ElastiV1alpha1().ElastiServices(other).Create(ctx, es("web"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("editor created an ElastiService in a namespace it is not bound in: err %v, want Forbidden", err)
	}

	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = viewer.ElastiV1alpha1().ElastiServices(tenant).Get(ctx, "web", metav1.GetOptions{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("a user bound to view could not get an ElastiService in %s: %v (last: %v)", tenant, err, last)
	}
	for what, err := range map[string]error{
		"create": func() error {
			_, err := viewer.ElastiV1alpha1().ElastiServices(tenant).Create(ctx, es("other"), metav1.CreateOptions{})
			return err
		}(),
		"update": func() error {
			_, err := viewer.ElastiV1alpha1().ElastiServices(tenant).Update(ctx, created, metav1.UpdateOptions{})
			return err
		}(),
		"delete": viewer.ElastiV1alpha1().ElastiServices(tenant).Delete(ctx, "web", metav1.DeleteOptions{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("viewer %s: err %v, want Forbidden", what, err)
		}
	}

	if err := editor.ElastiV1alpha1().ElastiServices(tenant).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Errorf("editor delete: %v", err)
	}
}
