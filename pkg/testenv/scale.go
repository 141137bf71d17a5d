package testenv

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
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
