package traffic

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/resolver"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/testenv"
)

const (
	// moved is the Service web's ElastiService moves to; it selects the
	// same pods.
	moved = "web-v2"
	// moveRequestTimeout is each request's deadline during the move.
	moveRequestTimeout = 30 * time.Second
	// moveHeld is how many requests each way of calling a Service sends
	// while the target cannot start yet, so the resolver must hold them.
	moveHeld = 4
	// moveRounds bounds the requests sent after the target started, until
	// the move completes.
	moveRounds = 20
)

// TestMovingSpecServiceAtZeroServesBothServices: web sleeps, and its
// ElastiService's spec.service is changed to web-v2, which selects the same
// pods. The target is woken for the move, but its pod cannot start yet, so
// requests to both Services, by short and by full DNS name, are held by
// the resolver; none is refused. Once the pod starts every one gets the
// app's 200, and so does every request sent while the move completes: no
// 404, no 502, no Service dark. At the end web's generated objects are
// gone and no resolver listens for it any more.
func TestMovingSpecServiceAtZeroServesBothServices(t *testing.T) {
	sideBySideScenario(t)
	s := newScenario(t)
	s.waitEveryResolverListens(1)
	s.sleep()
	began := time.Now()
	s.e.Service(moved, app)
	s.keepTargetFromStarting()
	s.moveTo(moved)

	// The move wakes the target and fronts web-v2 too, on a resolver port
	// of its own, while web keeps its own.
	s.e.WaitReplicas(elastiv1alpha1.KindDeployment, app, 1)
	s.eventually("the WokenForServiceChange event", func() (bool, string) { return s.e.HasEvent(app, "WokenForServiceChange") })
	s.waitEveryResolverListensFor(moved, 1)
	s.waitEveryResolverListensFor(app, 1)
	// A short name needs web-v2's slice on its own resolver port.
	s.eventually("web-v2's resolver slice on its resolver port", func() (bool, string) {
		sl, err := s.e.ResolverSlice(moved)
		if err != nil || len(sl.Ports) == 0 {
			return false, fmt.Sprint(err)
		}
		port := *sl.Ports[0].Port
		return port != 8012, fmt.Sprintf("port %d", port)
	})
	// web-v2 is a new Service with no endpoint until the resolver fronts
	// it; kube-proxy refuses its connections until it has followed that
	// slice (its sync period, about a second), as it would for any user.
	if err := s.bed.WaitKubeProxyFollows(s.ctx, s.e.NS, moved, testenv.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	movedDark := s.e.WatchDark(moved)
	t.Logf("%s: both Services fronted, the target woken and kept from starting", time.Since(began).Round(time.Millisecond))

	urls := map[string]string{
		"old, short name": "http://" + app + "/move",
		"old, full name":  "http://" + s.fqdn() + "/move",
		"new, short name": "http://" + moved + "/move",
		"new, full name":  fmt.Sprintf("http://%s.%s.svc.cluster.local/move", moved, s.e.NS),
	}
	held := s.sendAll(urls, moveHeld)
	// Processes start and connect within a second; the pod's absence holds
	// them at the resolver until it may start.
	time.Sleep(2 * time.Second)
	s.letTargetStart()
	for way, resps := range held() {
		for _, r := range resps {
			s.expectApp(way, r)
			if r.Header.Get(resolver.DefaultColdStartHeader) == "" {
				t.Errorf("%s: answered without %s, so not held by the resolver mid-move: %s", way, resolver.DefaultColdStartHeader, r)
			}
		}
	}

	t.Logf("%s: every held request answered", time.Since(began).Round(time.Millisecond))

	// While the old Service is let go of, both keep answering.
	round := 0
	for ; round < moveRounds && !s.moveDone(); round++ {
		for way, resps := range s.sendAll(urls, 1)() {
			for _, r := range resps {
				s.expectApp(way, r)
			}
		}
	}
	s.eventually("web's generated objects to be gone and its ports released", func() (bool, string) {
		return s.moveDone(), fmt.Sprintf("status.resolverPorts %+v", s.e.Get(app).Status.ResolverPorts)
	})
	s.waitEveryResolverListensFor(app, 0)
	s.e.WaitMode(app, elastiv1alpha1.ModeServe)
	t.Logf("%s: the move completed; %d rounds of requests after the pod started", time.Since(began).Round(time.Millisecond), round)
	if samples, dark := movedDark.Stats(); samples == 0 || dark > 0 {
		t.Errorf("web-v2's watcher: %d samples, %d dark", samples, dark)
	}
}

// moveTo changes web's ElastiService's spec.service.
func (s *scenario) moveTo(svc string) {
	s.t.Helper()
	s.e.UpdateSpec(app, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Service = svc
	})
}

// sendAll sends n requests at once to each URL, every one from the client
// pod, and returns a function that waits for the answers, by URL key.
func (s *scenario) sendAll(urls map[string]string, n int) func() map[string][]realnet.Response {
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[string][]realnet.Response{}
	)
	for way, url := range urls {
		wg.Go(func() {
			resp, err := s.client.Do(s.ctx, realnet.Request{URL: url + "/{i}", Timeout: moveRequestTimeout, Parallel: n})
			if err != nil {
				resp = realnet.Response{Err: err.Error()}
			}
			all := resp.Parallel
			if len(all) != n {
				all = append(all, resp) // the harness failed: report what it said
			}
			mu.Lock()
			out[way] = all
			mu.Unlock()
		})
	}
	return func() map[string][]realnet.Response {
		wg.Wait()
		return out
	}
}

// expectApp checks that r is the app's own 200 from a Ready pod.
func (s *scenario) expectApp(way string, r realnet.Response) {
	s.t.Helper()
	var reply echoReply
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &reply) != nil {
		s.t.Errorf("%s: want the app's 200, got %s", way, r)
		return
	}
	if pods := s.e.ReadyPodIPs(app); !slices.Contains(pods, reply.ServedBy) {
		s.t.Errorf("%s: answered by %s, not a Ready pod of web (%v)", way, reply.ServedBy, pods)
	}
}

// moveDone reports whether web's ElastiService let go of web: its resolver
// slice and private Service are gone and status records only web-v2's
// ports.
func (s *scenario) moveDone() bool {
	s.t.Helper()
	_, sliceErr := s.e.ResolverSlice(app)
	_, privErr := s.e.PrivateService(app)
	for _, p := range s.e.Get(app).Status.ResolverPorts {
		if p.Service != moved {
			return false
		}
	}
	return apierrors.IsNotFound(sliceErr) && apierrors.IsNotFound(privErr)
}
