package realnode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/hack/images/oci"
	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

// addonTimeout bounds one add-on's move onto the real node: two image
// starts and a rolling update.
const addonTimeout = 3 * time.Minute

// Addon is one of realnet's add-on Deployments that the real node runs as
// a container, from an image of the binary the bed builds.
type Addon struct {
	Namespace, Deployment string
	// Binary is the file under the cluster's BinDir the image holds.
	Binary string
	// LowPort, when set, is the lowest port below 1024 it listens on. The
	// image runs as a non-root user, so the pod opens ports from LowPort
	// up to it with the namespaced, kubelet-safe sysctl
	// net.ipv4.ip_unprivileged_port_start rather than a capability.
	LowPort int
}

// Addons are the add-ons the real node takes over from the process node:
// the cluster DNS and the ingress controller, which every client path
// crosses. Prometheus stays a process: only the trigger tests read it, and
// it runs from the process node in every bed.
var Addons = []Addon{
	{Namespace: realnet.DNSNamespace, Deployment: realnet.DNSDeployment, Binary: localcluster.CoreDNSBinary, LowPort: 53},
	{Namespace: realnet.IngressNamespace, Deployment: realnet.IngressService, Binary: localcluster.TraefikBinary},
}

// BuildAddonImages builds every Addon's image in dir, from the binary the
// bed built (hack/build-cluster-bins.sh), tagged as realnet's manifests
// name it, for Options.Images.
func BuildAddonImages(c *localcluster.Cluster, dir string) ([]Image, error) {
	var images []Image
	for _, a := range Addons {
		ref, err := realnet.AddonImage(a.Namespace, a.Deployment)
		if err != nil {
			return nil, err
		}
		version := ref[strings.LastIndex(ref, ":")+1:]
		img, err := imageOf(filepath.Join(c.BinDir, a.Binary), a.Binary, ref, dir,
			oci.Meta{Version: version, Revision: "realnode-addon", Created: time.Unix(0, 0)})
		if err != nil {
			return nil, err
		}
		images = append(images, img)
	}
	return images, nil
}

// RestrictedSecurityContext is the securityContext the manifests give
// elasti's containers, which the bed gives every container it runs on the
// real node: uid 65532, no privilege escalation, no capabilities, a
// read-only root and the runtime's seccomp profile.
func RestrictedSecurityContext() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	return &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}, &corev1.SecurityContext{
			ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
}

// RunAddons moves the Addons' Deployments from the process node onto this
// node, with the images BuildAddonImages made (import them through
// Options.Images), under RestrictedSecurityContext. It is a rolling
// update, so the DNS and the ingress keep answering throughout, and it
// returns once each rollout is complete and its pods run here.
func (n *Node) RunAddons(ctx context.Context, cs kubernetes.Interface) error {
	for _, a := range Addons {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := cs.AppsV1().Deployments(a.Namespace).Get(ctx, a.Deployment, metav1.GetOptions{})
			if err != nil {
				return err
			}
			d = d.DeepCopy()
			spec := &d.Spec.Template.Spec
			podSC, sc := RestrictedSecurityContext()
			if a.LowPort > 0 {
				podSC.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: fmt.Sprint(a.LowPort)}}
			}
			spec.SecurityContext = podSC
			for i := range spec.Containers {
				spec.Containers[i].SecurityContext = sc
			}
			if err := n.PreparePod(ctx, cs, a.Namespace, spec); err != nil {
				return err
			}
			_, err = cs.AppsV1().Deployments(a.Namespace).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("realnode: move %s/%s onto the real node: %w", a.Namespace, a.Deployment, err)
		}
		if err := n.opts.Net.WaitDeploymentReady(ctx, a.Namespace, a.Deployment, addonTimeout); err != nil {
			return fmt.Errorf("realnode: %s/%s on the real node: %w", a.Namespace, a.Deployment, err)
		}
		pods, err := cs.CoreV1().Pods(a.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=" + NodeName})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && strings.HasPrefix(p.Name, a.Deployment+"-") {
				return fmt.Errorf("realnode: %s/%s still runs pod %s on %s after its rollout", a.Namespace, a.Deployment, p.Name, p.Spec.NodeName)
			}
		}
	}
	return nil
}
