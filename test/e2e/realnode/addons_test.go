package realnode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
	"github.com/elasti-dev/elasti/test/testenv"
)

// TestDNSAndIngressRunAsContainersOnTheRealNode: the cluster DNS and the
// ingress controller run from images as real containers on the real node,
// under the restricted securityContext, and serve: a client pod reaches
// an app by its short name and through the ingress by host.
func TestDNSAndIngressRunAsContainersOnTheRealNode(t *testing.T) {
	b := testBed(t)
	for _, a := range realnode.Addons {
		d, err := b.kube.AppsV1().Deployments(a.Namespace).Get(t.Context(), a.Deployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		b.checkBuiltPods(t, a.Namespace, metav1.ListOptions{LabelSelector: sel.String()})
		if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) {
			t.Errorf("%s/%s runs without runAsNonRoot: %+v", a.Namespace, a.Deployment, sc)
		}
	}

	e := testenv.New(t)
	b.sampleApp(t, e, app, 1, nil)
	host := app + ".example"
	ing := realnet.Ingress(e.NS, app, host, app)
	if _, err := e.Kube.NetworkingV1().Ingresses(e.NS).Create(t.Context(), ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client, err := b.net.Client(t.Context(), e.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, req := range []realnet.Request{
		{URL: "http://" + app + "/"},
		{URL: "http://" + realnet.IngressService + "." + realnet.IngressNamespace + "/", Host: host},
	} {
		req.Timeout = 2 * time.Second
		var got realnet.Response
		e.Eventually("an answer from web's pod to "+req.URL+" (Host "+req.Host+")", func() (bool, string) {
			resp, err := client.Do(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			got = resp
			return resp.Status == 200 && strings.Contains(resp.Body, "servedBy"), resp.String()
		})
		var reply struct {
			ServedBy string `json:"servedBy"`
		}
		if err := json.Unmarshal([]byte(got.Body), &reply); err != nil {
			t.Fatalf("%s: not the sample app's answer: %v: %q", req.URL, err, got.Body)
		}
		if names := readyPodNames(e, app); len(names) != 1 || names[0] != reply.ServedBy {
			t.Errorf("%s: answered by %q, want web's one Ready pod (Ready: %v)", req.URL, reply.ServedBy, names)
		}
	}
}
