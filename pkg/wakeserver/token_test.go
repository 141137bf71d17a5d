package wakeserver

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/scaletarget/scaletargettest"
	"github.com/elasti-dev/elasti/pkg/waketoken"
)

// postWith sends the wake body with an Authorization header (none when
// empty) and returns the status and the WWW-Authenticate header.
func postWith(t *testing.T, url, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

func tokenFile(t *testing.T, content string) (string, *waketoken.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := waketoken.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

// outcomes is the Observer of the tests' servers: it records the
// outcome of every request.
type outcomes struct {
	mu  sync.Mutex
	got []outcome.Wake
}

func (o *outcomes) ObserveWakeRequest(result outcome.Wake, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, result)
}

func (o *outcomes) WakeStarted(types.NamespacedName, time.Time) {}

func TestWithATokenConfiguredOnlyTheTokenWakes(t *testing.T) {
	_, tokens := tokenFile(t, "right-token\n")
	cfg := DefaultConfig()
	cfg.Tokens = tokens
	scaler := &scaletargettest.Scaler{}
	s, _, url := setupWith(t, true, scaler, cfg)
	seen := s.observer.(*outcomes)

	const (
		askForToken = `Bearer realm="elasti-operator"`
		invalid     = `Bearer realm="elasti-operator", error="invalid_token"`
	)
	for _, c := range []struct{ authorization, challenge string }{
		{"", askForToken},
		{"Bearer wrong-token", invalid},
		{"Bearer right-token-and-more", invalid},
		{"Basic cmlnaHQtdG9rZW4=", askForToken},
		{"right-token", askForToken},
	} {
		code, challenge := postWith(t, url, c.authorization)
		if code != http.StatusUnauthorized || challenge != c.challenge {
			t.Errorf("Authorization %q: %d with WWW-Authenticate %q; want 401 with %q", c.authorization, code, challenge, c.challenge)
		}
	}
	if n := scaler.Calls(); n != 0 {
		t.Fatalf("%d scale calls from refused requests, want none", n)
	}
	if code, _ := postWith(t, url, "Bearer right-token"); code != http.StatusOK || scaler.Calls() != 1 {
		t.Errorf("with the right token: %d and %d scale calls; want 200 and 1", code, scaler.Calls())
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	want := []outcome.Wake{outcome.WakeUnauthorized, outcome.WakeUnauthorized, outcome.WakeUnauthorized, outcome.WakeUnauthorized, outcome.WakeUnauthorized, outcome.WakeScaled}
	if !slices.Equal(seen.got, want) {
		t.Errorf("observed outcomes %v, want %v", seen.got, want)
	}
}

// A caller without the token learns nothing, not even that this replica
// is not the leader.
func TestTheTokenIsCheckedBeforeReadiness(t *testing.T) {
	_, tokens := tokenFile(t, "right-token\n")
	cfg := DefaultConfig()
	cfg.Tokens = tokens
	_, _, url := setupWith(t, false, &scaletargettest.Scaler{}, cfg)
	if code, _ := postWith(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("no token on a follower: %d, want 401", code)
	}
	if code, _ := postWith(t, url, "Bearer right-token"); code != http.StatusServiceUnavailable {
		t.Errorf("the right token on a follower: %d, want 503", code)
	}
}

// Without a token configured the endpoint is KubeElasti's: every request
// is served, with or without an Authorization header.
func TestWithoutATokenEveryRequestIsServed(t *testing.T) {
	scaler := &scaletargettest.Scaler{}
	_, _, url := setup(t, true, scaler)
	for _, authorization := range []string{"", "Bearer anything"} {
		if code, challenge := postWith(t, url, authorization); code != http.StatusOK || challenge != "" {
			t.Errorf("Authorization %q: %d %q, want 200 and no challenge", authorization, code, challenge)
		}
	}
	if n := scaler.Calls(); n != 1 {
		t.Errorf("%d scale calls, want 1", n)
	}
}

// A rotated token file is in force at the next request.
func TestARotatedTokenTakesEffectWithoutRestart(t *testing.T) {
	path, tokens := tokenFile(t, "old-token\n")
	cfg := DefaultConfig()
	cfg.Tokens = tokens
	scaler := scaletargettest.New(5) // already up: every accepted request is 200 without writes
	_, _, url := setupWith(t, true, scaler, cfg)
	if code, _ := postWith(t, url, "Bearer old-token"); code != http.StatusOK {
		t.Fatalf("old token before rotation: %d", code)
	}
	// Both during the rollout, then only the new one.
	for _, step := range []struct {
		content  string
		old, new int
	}{
		{"new-token\nold-token\n", http.StatusOK, http.StatusOK},
		{"new-token\n", http.StatusUnauthorized, http.StatusOK},
	} {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(step.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		oldCode, _ := postWith(t, url, "Bearer old-token")
		newCode, _ := postWith(t, url, "Bearer new-token")
		if oldCode != step.old || newCode != step.new {
			t.Errorf("file %q: old token %d, new token %d; want %d and %d", step.content, oldCode, newCode, step.old, step.new)
		}
	}
}

// The operator passes a token file as the verifier.
var _ TokenVerifier = (*waketoken.File)(nil)
