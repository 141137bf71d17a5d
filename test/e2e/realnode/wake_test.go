package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	app = "web"
	// podTimeout bounds a pod's start or end as a real container.
	podTimeout = 2 * time.Minute
)

// sampleApp creates the sample app's Deployment (one real container on
// the real node, Ready by an HTTP probe) and its public Service.
func (b *bed) sampleApp(t testing.TB, e *testenv.Env, name string, replicas int32, mutate func(*corev1.Container)) {
	t.Helper()
	podSC, sc := realnode.RestrictedSecurityContext()
	e.Deployment(name, replicas, func(d *appsv1.Deployment) {
		spec := &d.Spec.Template.Spec
		spec.NodeSelector, spec.Tolerations = nil, nil
		spec.SecurityContext = podSC
		spec.AutomountServiceAccountToken = ptr.To(false)
		spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		spec.Containers = []corev1.Container{{
			Name: "app", Image: realnode.SampleAppImage, SecurityContext: sc,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
				PeriodSeconds: 1,
			},
		}}
		if mutate != nil {
			mutate(&spec.Containers[0])
		}
		if err := b.node.PreparePod(t.Context(), b.kube, e.NS, spec); err != nil {
			t.Fatal(err)
		}
	})
	e.Service(name, name)
}

// sleepingApp runs the sample app web (mutate, when set, edits its
// container first) under an ElastiService, then scales it to zero by hand
// and waits until the resolver is in front: proxy mode, no pod left, and
// kube-proxy following the resolver slice.
func (b *bed) sleepingApp(t testing.TB, e *testenv.Env, mutate func(*corev1.Container)) {
	t.Helper()
	b.sampleApp(t, e, app, 1, mutate)
	e.ElastiServiceWith(app, app, elastiv1alpha1.KindDeployment, app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.MinTargetReplicas = 1
	})
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	e.Eventually("web's pod to be Ready", func() (bool, string) {
		names := readyPodNames(e, app)
		return len(names) == 1, fmt.Sprint(names)
	})
	b.sleep(t, e)
}

// sleep scales the sample app web to zero by hand and waits until the
// resolver is in front: proxy mode, no pod left, and kube-proxy following
// the resolver slice.
func (b *bed) sleep(t testing.TB, e *testenv.Env) {
	t.Helper()
	e.Scale(elastiv1alpha1.KindDeployment, app, 0)
	e.WaitMode(app, elastiv1alpha1.ModeProxy)
	e.Eventually("web's pods to be gone", func() (bool, string) {
		pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
		return err == nil && len(pods.Items) == 0, fmt.Sprint(err)
	})
	if err := b.net.WaitKubeProxyFollows(t.Context(), e.NS, app, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
}

// clientGet runs a client pod on the real node that GETs url (the sample
// app's client mode) and returns its output once it has exited 0. A client
// that fails fails the test with its output.
func (b *bed) clientGet(t *testing.T, ns, name, url string) string {
	t.Helper()
	podSC, sc := realnode.RestrictedSecurityContext()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, SecurityContext: podSC,
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "client", Image: realnode.SampleAppImage, Args: []string{"get", url}, SecurityContext: sc}},
		},
	}
	if err := b.node.PreparePod(t.Context(), b.kube, ns, &pod.Spec); err != nil {
		t.Fatal(err)
	}
	if _, err := b.kube.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := waitPod(t, b.kube, ns, name, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	logs, err := b.kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		t.Fatalf("client pod's log: %v", err)
	}
	if done.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client pod %s (%s) failed: %s\n%s%s", name, done.Status.PodIP, realnet.DescribePod(done), logs, b.diagnose())
	}
	return string(logs)
}

// waitPod waits until done(pod) holds, failing with the pod's state after
// podTimeout.
func waitPod(t *testing.T, cs kubernetes.Interface, ns, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), podTimeout)
	defer cancel()
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(p) {
			return p
		}
		select {
		case <-ctx.Done():
			desc := fmt.Sprint(err)
			if p != nil {
				desc = realnet.DescribePod(p)
			}
			t.Fatalf("pod %s/%s not done after %s: %s%s", ns, name, podTimeout, desc, testBed(t).diagnose())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readyPodNames lists the names of app's Ready pods.
func readyPodNames(e *testenv.Env, app string) []string {
	pods, err := e.Kube.CoreV1().Pods(e.NS).List(e.Ctx(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.T.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && testenv.PodReady(&p) {
			names = append(names, p.Name)
		}
	}
	return names
}

// checkElastiPods asserts that every elasti pod runs on the real node, has
// never restarted, and runs the image built from this tree: its
// containerStatuses' imageID is the built image's digest. It logs both.
func (b *bed) checkElastiPods(t *testing.T) {
	t.Helper()
	b.checkBuiltPods(t, elastiNamespace, metav1.ListOptions{})
}

// checkBuiltPods asserts what checkElastiPods does for the pods of
// namespace that opts selects.
func (b *bed) checkBuiltPods(t *testing.T, namespace string, opts metav1.ListOptions) {
	t.Helper()
	pods, err := b.kube.CoreV1().Pods(namespace).List(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no pods in %s (%s)", namespace, opts.LabelSelector)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != realnode.NodeName {
			t.Errorf("pod %s runs on %q, want %s", p.Name, p.Spec.NodeName, realnode.NodeName)
		}
		for _, st := range p.Status.ContainerStatuses {
			img, ok := b.images[st.Image]
			if !ok {
				// The CRI may report the image by its ID; find the spec's.
				for _, c := range p.Spec.Containers {
					if c.Name == st.Name {
						img, ok = b.images[c.Image]
					}
				}
			}
			t.Logf("pod %s container %s: image %s imageID %s containerID %s restarts %d", p.Name, st.Name, st.Image, st.ImageID, st.ContainerID, st.RestartCount)
			if !ok {
				t.Errorf("pod %s container %s runs %s, not an image built from this tree", p.Name, st.Name, st.Image)
				continue
			}
			if st.ImageID != img.ID && !strings.HasSuffix(st.ImageID, "@"+img.ID) {
				t.Errorf("pod %s container %s: imageID %s, want the built image's digest %s", p.Name, st.Name, st.ImageID, img.ID)
			}
			if !strings.HasPrefix(st.ContainerID, "containerd://") {
				t.Errorf("pod %s container %s: containerID %q, want containerd://…", p.Name, st.Name, st.ContainerID)
			}
			if st.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times%s", p.Name, st.Name, st.RestartCount, b.diagnose())
			}
		}
	}
}

// TestShortNameWakesAnAppOnTheRealNode is the user's day one, as real
// containers: elasti from manifests/ on the real node, a sample app there
// under an ElastiService, scaled to zero so the resolver is in front. A
// client pod on the real node GETs it by its short name: the cluster DNS
// resolves it to the ClusterIP, kube-proxy sends it to a resolver pod,
// which asks the operator (by its Service) to scale the target up and
// holds the request until the new container is Ready, then proxies it.
// The answer is the new pod's; elasti's pods never restarted and run the
// images built from this tree.
func TestShortNameWakesAnAppOnTheRealNode(t *testing.T) {
	b := testBed(t)
	e := testenv.New(t)
	b.sleepingApp(t, e, nil)

	out := b.clientGet(t, e.NS, "client", "http://"+app+"/")
	t.Logf("client pod: %s", out)
	body := out[strings.Index(out, "\n")+1:]
	var reply struct {
		ServedBy string `json:"servedBy"`
		Host     string `json:"host"`
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil {
		t.Fatalf("not the sample app's answer: %v: %q", err, out)
	}
	if reply.Host != app {
		t.Errorf("the app saw Host %q, want %q as the client sent it", reply.Host, app)
	}
	if names := readyPodNames(e, app); len(names) != 1 || names[0] != reply.ServedBy {
		t.Errorf("answered by %q, want web's one Ready pod (Ready: %v)", reply.ServedBy, names)
	}
	if got := e.Replicas(elastiv1alpha1.KindDeployment, app); got != 1 {
		t.Errorf("target has %d replicas after the wake, want 1", got)
	}
	e.WaitMode(app, elastiv1alpha1.ModeServe)
	b.checkElastiPods(t)
}
