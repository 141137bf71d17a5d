package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
)

// InstallManifests applies the manifests in dir (manifests/) as a user
// would, except that their Deployments go through PreparePod (the node's
// toleration and selector, imagePullPolicy Never, the apiserver through
// the bed's forwarder, the token volume): a patch on the way in, the files
// stay as users get them. Everything else is applied unchanged with
// kubectl, first, so the namespace, RBAC and Services exist before the
// pods. A Deployment that exists already (a reused cluster) is replaced.
// It returns kubectl's output.
func (n *Node) InstallManifests(ctx context.Context, c *localcluster.Cluster, kube kubernetes.Interface, dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	rest, err := os.MkdirTemp("", "elasti-manifests-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(rest)
	var deployments []*appsv1.Deployment
	count := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return "", fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetKind() == "Deployment" {
				d := &appsv1.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
					return "", fmt.Errorf("%s: %w", f, err)
				}
				deployments = append(deployments, d)
				continue
			}
			js, err := json.Marshal(u.Object)
			if err != nil {
				return "", err
			}
			count++
			if err := os.WriteFile(filepath.Join(rest, fmt.Sprintf("%03d.json", count)), js, 0o644); err != nil {
				return "", err
			}
		}
	}
	out, err := c.Kubectl(ctx, "apply", "-f", rest)
	if err != nil {
		return string(out), err
	}
	for _, d := range deployments {
		if err := n.PreparePod(ctx, kube, d.Namespace, &d.Spec.Template.Spec); err != nil {
			return string(out), err
		}
		deployments := kube.AppsV1().Deployments(d.Namespace)
		_, err := deployments.Create(ctx, d, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var old *appsv1.Deployment
			if old, err = deployments.Get(ctx, d.Name, metav1.GetOptions{}); err == nil {
				d.ResourceVersion = old.ResourceVersion
				_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return string(out), fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		out = append(out, fmt.Sprintf("deployment.apps/%s applied with the real node's placement\n", d.Name)...)
	}
	return string(out), nil
}
