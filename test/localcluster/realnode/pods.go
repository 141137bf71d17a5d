package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// CAConfigMap holds the apiserver's CA (key ca.crt) in the namespaces
	// of the pods PreparePod prepares: the bed runs no root-CA publisher.
	CAConfigMap = "elasti-realnode-kube-api-ca"
	// serviceAccountDir is where in-cluster clients read their token, CA
	// and namespace.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// apiAccessVolume names the volume PreparePod adds, as the
	// ServiceAccount admission plugin names its own.
	apiAccessVolume = "kube-api-access"
	// tokenSeconds is the projected token's lifetime; the kubelet renews
	// it at 80%.
	tokenSeconds = 3607
)

// PreparePod makes a pod spec, as a user's manifest has it, run on the real
// node, changing only what the bed needs:
//   - the toleration of the node's taint and a nodeSelector for it;
//   - imagePullPolicy: Never on every container: images are imported;
//   - when the pod has a ServiceAccount and mounts its token, the volume
//     the ServiceAccount admission plugin would add (the bed runs without
//     that plugin): a projected token, the CA from CAConfigMap, the
//     namespace;
//   - KUBERNETES_SERVICE_HOST/PORT set to realnet's forwarder, since the
//     apiserver listens on loopback and its `kubernetes` Service's
//     endpoint, 127.0.0.1, means nothing from a pod. Explicit env wins over
//     the kubelet's Service variables.
//
// It creates CAConfigMap in namespace if it is missing.
func (n *Node) PreparePod(ctx context.Context, cs kubernetes.Interface, namespace string, spec *corev1.PodSpec) error {
	host, port, err := net.SplitHostPort(n.opts.Net.APIServer())
	if err != nil {
		return err
	}
	if !prepareSpec(spec, host, port) {
		return nil
	}
	ca, err := os.ReadFile(n.opts.Cluster.CAFile)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: CAConfigMap},
		Data:       map[string]string{"ca.crt": string(ca)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("realnode: CA ConfigMap in %s: %w", namespace, err)
	}
	return nil
}

// prepareSpec is PreparePod's change to spec, with the apiserver at
// host:port; it reports whether the pod mounts its ServiceAccount token,
// so that PreparePod makes the CA ConfigMap the token volume reads.
func prepareSpec(spec *corev1.PodSpec, host, port string) (mountToken bool) {
	// Idempotent: a spec prepared before (make demo run again on the
	// cluster it left running) is left as it is, not given a second
	// volume, mount or variable of the same name, which the apiserver
	// refuses.
	if !slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t == Toleration() }) {
		spec.Tolerations = append(spec.Tolerations, Toleration())
	}
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	for k, v := range NodeSelector() {
		spec.NodeSelector[k] = v
	}
	mountToken = spec.ServiceAccountName != "" && (spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken)
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			c.ImagePullPolicy = corev1.PullNever
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "KUBERNETES_SERVICE_HOST" || e.Name == "KUBERNETES_SERVICE_PORT" || e.Name == "KUBERNETES_SERVICE_PORT_HTTPS"
			})
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: host},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: port},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: port})
			if mountToken && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == serviceAccountDir }) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: apiAccessVolume, MountPath: serviceAccountDir, ReadOnly: true})
			}
		}
	}
	if !mountToken {
		return false
	}
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == apiAccessVolume })
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: apiAccessVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](tokenSeconds)}},
				{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: corev1.LocalObjectReference{Name: CAConfigMap},
					Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
				}}},
			},
		},
	}})
	return true
}
