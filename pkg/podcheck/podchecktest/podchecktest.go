// Package podchecktest serves pods' checks in tests: real servers on
// 127.0.0.x standing for pod addresses, and pods whose probes point at
// them. Tests that use it connect to nothing else.
package podchecktest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Serve starts h on ip (a loopback address) and returns the server and
// its port; the server stops when the test ends.
func Serve(t testing.TB, ip string, h http.Handler) (*httptest.Server, int32) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &httptest.Server{Listener: l, Config: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}}
	s.Start()
	t.Cleanup(func() { s.CloseClientConnections(); s.Close() })
	return s, int32(l.Addr().(*net.TCPAddr).Port)
}

// Pod is a running pod at ip whose one container "app" has the given
// probes and a port named "web" at port.
func Pod(ip string, port int32, readiness, startup *corev1.Probe) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1", UID: "pod-uid-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: port}},
			ReadinessProbe: readiness, StartupProbe: startup,
		}}},
		Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// HTTPProbe is an httpGet probe of path on port.
func HTTPProbe(path string, port intstr.IntOrString) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port}}}
}
