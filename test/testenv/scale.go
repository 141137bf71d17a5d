package testenv

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Post sends body to url as JSON and returns the status code and body.
func Post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WakeBody is KubeElasti's scale request body.
func WakeBody(svc, ns string) string {
	return fmt.Sprintf(`{"count":1,"svc":%q,"namespace":%q}`, svc, ns)
}

// WakeEvery asks the scale endpoint that url names at the moment (tests
// replace the operator meanwhile) to wake each of services in namespace,
// as resolvers holding a request for each would: each keeps asking every
// 200 ms until its Service is woken or stop closes.
func WakeEvery(stop <-chan struct{}, url func() string, namespace string, services []string) {
	client := &http.Client{Timeout: 5 * time.Second}
	wake := func(name string) bool {
		resp, err := client.Post(url(), "application/json", strings.NewReader(WakeBody(name, namespace)))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	var wg sync.WaitGroup
	for _, name := range services {
		wg.Go(func() {
			for !wake(name) {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
}
