package triggers

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// marker stands for whatever an arbitrary server might hold: it must never
// reach an error message, which ends up in events.
const marker = "SECRET-MARKER-7f3a"

func TestParseServerPrefixes(t *testing.T) {
	got, err := ParseServerPrefixes(" http://Prometheus.Monitoring:9090 ,, https://mimir.example/prometheus/ ,http://[::1]")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://prometheus.monitoring:9090", "https://mimir.example:443/prometheus", "http://[::1]:80"}
	if len(got) != len(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	if list, err := ParseServerPrefixes("  "); err != nil || list != nil {
		t.Errorf("blank list = %v, %v; want none (any server)", list, err)
	}
	for _, bad := range []struct{ entry, want string }{
		{"prometheus:9090", "not an absolute http or https URL"},
		{"prometheus.monitoring", "not an absolute http or https URL"},
		{"*.monitoring.svc", "not an absolute http or https URL"},
		{"ftp://p", "not an absolute http or https URL"},
		{"http://[::1", "not a valid URL"},
		{"http://user:" + marker + "@p", "user information"},
		{"http://p/?tenant=" + marker, "query or fragment"},
		{"http://p/#x", "query or fragment"},
	} {
		_, err := ParseServerPrefixes("http://ok:9090," + bad.entry)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseServerPrefixes(%q) = %v, want an error with %q", bad.entry, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), marker) {
			t.Errorf("error repeats a secret: %v", err)
		}
	}
}

func TestServerPrefixMatching(t *testing.T) {
	for _, tt := range []struct {
		prefix, server string
		want           bool
	}{
		{"http://prom:9090", "http://prom:9090", true},
		{"http://prom:9090", "http://PROM:9090/", true},
		{"http://prom:9090", "http://prom:9090/any/path?tenant=a", true},
		{"http://prom:9090", "http://user:pw@prom:9090", true},
		{"http://prom", "http://prom:80", true},
		{"https://prom", "https://prom:443/x", true},
		{"http://prom:9090/prom", "http://prom:9090/prom", true},
		{"http://prom:9090/prom/", "http://prom:9090/prom/sub", true},
		{"http://prom:9090/prom", "http://prom:9090/prometheus", false},
		{"http://prom:9090/prom", "http://prom:9090/prom/../admin", false},
		{"http://prom:9090/prom", "http://prom:9090/", false},
		{"http://prom:9090", "https://prom:9090", false},
		{"https://prom:9090", "http://prom:9090", false},
		{"http://prom:9090", "http://prom:9091", false},
		{"http://prom", "http://prom:8080", false},
		{"http://prom:9090", "http://prom.evil:9090", false},
		{"http://prom:9090", "http://prom:9090@evil:9090", false},
		{"http://prom.monitoring:9090", "http://prom.monitoring.svc.cluster.local:9090", false},
	} {
		p, err := ParseServerPrefix(tt.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got := isListed(tt.server, []ServerPrefix{p}); got != tt.want {
			t.Errorf("%s at %s: %v, want %v", tt.server, tt.prefix, got, tt.want)
		}
		if got := isDefaultServer(tt.server, tt.prefix); got != tt.want {
			t.Errorf("%s is default server %s: %v, want %v", tt.server, tt.prefix, got, tt.want)
		}
	}
	if isDefaultServer("http://prom:9090", "") || isListed("http://prom:9090", nil) {
		t.Error("no default server and no list matched a server")
	}
}

// The operator's Authorization goes to its default server and nowhere else;
// a trigger's own headers still go to its own server.
func TestDefaultCredentialGoesOnlyToTheDefaultServer(t *testing.T) {
	const credential = "Bearer operator-" + marker
	idle := always(http.StatusOK, vector(`"1"`))
	for _, tt := range []struct {
		name string
		meta func(def, other string) string
		// to is "default" or "other": where the request must go.
		to, wantAuth string
	}{
		{"no serverAddress", func(def, other string) string { return `{"query":"q","threshold":"5"}` }, "default", credential},
		{"the default address", func(def, other string) string { return `{"query":"q","threshold":"5","serverAddress":"` + def + `"}` }, "default", credential},
		{"the default address with a path", func(def, other string) string {
			return `{"query":"q","threshold":"5","serverAddress":"` + def + `/x/"}`
		}, "default", credential},
		{"another server", func(def, other string) string { return `{"query":"q","threshold":"5","serverAddress":"` + other + `"}` }, "other", ""},
		{"another server with its own header", func(def, other string) string {
			return `{"query":"q","threshold":"5","serverAddress":"` + other + `","headers":{"authorization":"Bearer mine"}}`
		}, "other", "Bearer mine"},
		{"the default server under its own Host", func(def, other string) string {
			return `{"query":"q","threshold":"5","headers":{"Host":"` + strings.TrimPrefix(def, "http://") + `"}}`
		}, "default", credential},
	} {
		t.Run(tt.name, func(t *testing.T) {
			def, other := newFakeProm(t, idle), newFakeProm(t, idle)
			d := Defaults{ServerAddress: def.URL, AuthorizationHeader: credential}
			v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{trigger(tt.meta(def.URL, other.URL))}, cooldown, d)
			if err != nil || !v.Idle {
				t.Fatalf("Evaluate = %+v, %v; want idle", v, err)
			}
			to, notTo := def, other
			if tt.to == "other" {
				to, notTo = other, def
			}
			if n := len(notTo.seen()); n != 0 {
				t.Fatalf("%d requests went to the wrong server", n)
			}
			reqs := to.seen()
			if len(reqs) != 2 {
				t.Fatalf("server got %d requests, want the health check and the query", len(reqs))
			}
			for _, r := range reqs {
				if got := r.Header.Get("Authorization"); got != tt.wantAuth {
					t.Errorf("%s got Authorization %q, want %q", r.Query, got, tt.wantAuth)
				}
			}
		})
	}
}

// A trigger that relied on KubeElasti sending the default credential to
// its own server is told why its server now answers 401 or 403.
func TestWithheldCredentialIsExplained(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		other := newFakeProm(t, always(code, ""))
		d := Defaults{ServerAddress: "http://prometheus.monitoring:9090", AuthorizationHeader: "Bearer op"}
		_, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{promTrigger(other.URL, "q", "1")}, cooldown, d)
		if ReasonOf(err) != ReasonBadStatus || !strings.Contains(err.Error(), "goes only to its default server") {
			t.Errorf("%d: err = %v; want BadStatus saying where the default Authorization goes", code, err)
		}
		// With its own Authorization, or no default, there is nothing to explain.
		own := trigger(`{"query":"q","threshold":"1","serverAddress":"` + other.URL + `","headers":{"Authorization":"Bearer mine"}}`)
		for _, c := range []struct {
			tr v1alpha1.ScaleTrigger
			d  Defaults
		}{{own, d}, {promTrigger(other.URL, "q", "1"), Defaults{}}} {
			_, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{c.tr}, cooldown, c.d)
			if err == nil || strings.Contains(err.Error(), "default server") {
				t.Errorf("%d: err = %v; want no word of the default Authorization", code, err)
			}
		}
	}
}

// A redirect is a failure; its target hears nothing, even from the default
// server, and the operator's credential stays where it was sent.
func TestRedirectsAreNotFollowed(t *testing.T) {
	target := newFakeProm(t, always(http.StatusOK, vector(`"0"`)))
	for _, code := range []int{http.StatusFound, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/api/v1/query?"+r.URL.RawQuery+"&m="+marker, code)
		}))
		t.Cleanup(redirector.Close)
		for _, c := range []*Client{testClient(), {HTTP: &http.Client{}}, {HTTP: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}}} {
			p := Prometheus{ServerAddress: redirector.URL, Trusted: true, Headers: map[string]string{"Authorization": "Bearer t"}}
			_, err := c.Query(t.Context(), p, "q")
			if ReasonOf(err) != ReasonRedirected {
				t.Fatalf("%d: err = %v, want reason %s", code, err, ReasonRedirected)
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("HTTP %d", code)) ||
				strings.Contains(msg, marker) || strings.Contains(msg, target.URL) {
				t.Errorf("%d: error %q repeats the Location", code, msg)
			}
		}
	}
	if n := len(target.seen()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// rawServer answers every request with response, written as is, so that it
// can send what net/http's server would not, such as its own reason phrase.
func rawServer(t *testing.T, response string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
					_, _ = conn.Write([]byte(response))
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// An ElastiService's author chooses its servers. Whatever one of them
// answers, only the status code and fixed text reach the error, and so the
// events: its body, headers and reason phrase never do, nor the secrets in
// the address itself.
func TestQueryQuotesNoTextOfOtherServers(t *testing.T) {
	bodies := []struct {
		name   string
		status int
		body   string
		reason Reason
	}{
		{"500 text", 500, "internal config: " + marker, ReasonBadStatus},
		{"500 html", 500, "<html>" + marker + "</html>", ReasonBadStatus},
		{"400 Prometheus error", 400, `{"status":"error","errorType":"bad_data","error":"` + marker + `"}`, ReasonBadStatus},
		{"400 other error type", 400, `{"status":"error","errorType":"` + marker + `","error":"x"}`, ReasonBadStatus},
		{"401 JSON", 401, `{"error":"token ` + marker + ` expired"}`, ReasonBadStatus},
		{"200 status error", 200, `{"status":"error","errorType":"execution","error":"` + marker + `"}`, ReasonQueryFailed},
		{"200 odd status", 200, `{"status":"` + marker + `"}`, ReasonBadResponse},
		{"200 odd result type", 200, `{"status":"success","data":{"resultType":"` + marker + `","result":[]}}`, ReasonBadResponse},
		{"200 value", 200, vector(`"` + marker + `"`), ReasonBadResponse},
		{"200 not JSON", 200, marker, ReasonBadResponse},
		{"200 vector malformed", 200, `{"status":"success","data":{"resultType":"vector","result":{"` + marker + `":1}}}`, ReasonBadResponse},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeProm(t, always(tt.status, tt.body))
			_, err := testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL}, "q")
			if ReasonOf(err) != tt.reason {
				t.Fatalf("err = %v, want reason %s", err, tt.reason)
			}
			if strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error quotes the server: %v", err)
			}
			if tt.status != 200 && !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", tt.status)) {
				t.Errorf("error %q lacks the status", err)
			}
		})
	}

	t.Run("known error type and status code", func(t *testing.T) {
		f := newFakeProm(t, always(400, `{"status":"error","errorType":"bad_data","error":"`+marker+`"}`))
		_, err := testClient().Query(t.Context(), Prometheus{ServerAddress: f.URL}, "q")
		if msg := err.Error(); !strings.Contains(msg, "HTTP 400 Bad Request (bad_data)") || !strings.Contains(msg, "not repeated") {
			t.Errorf("error %q does not give the status, the error type and where the rest can be seen", msg)
		}
	})

	t.Run("reason phrase and headers", func(t *testing.T) {
		addr := rawServer(t, "HTTP/1.1 500 "+marker+"\r\nX-Secret: "+marker+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_, err := testClient().Query(t.Context(), Prometheus{ServerAddress: addr, Trusted: true}, "q")
		if ReasonOf(err) != ReasonBadStatus || strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "HTTP 500 Internal Server Error") {
			t.Errorf("err = %v; want BadStatus with Go's own status text", err)
		}
	})

	// Userinfo and query of the address stay out, from any server, for
	// answers and transport errors alike (net/http's *url.Error repeats
	// the whole request URL).
	for _, trusted := range []bool{false, true} {
		f := newFakeProm(t, always(500, ""))
		for _, base := range []string{f.URL, closedServerURL(t)} {
			u, _ := url.Parse(base)
			u.User = url.UserPassword("user-"+marker, marker)
			u.RawQuery = "api_key=" + marker
			_, err := testClient().Query(t.Context(), Prometheus{ServerAddress: u.String(), Trusted: trusted}, "q")
			if err == nil || strings.Contains(err.Error(), marker) {
				t.Errorf("trusted=%v: err = %v; want an error without the address's secrets", trusted, err)
			}
			if !strings.Contains(err.Error(), base) {
				t.Errorf("trusted=%v: error %q does not name the server %s", trusted, err, base)
			}
		}
	}
}

// A server neither default nor listed is refused before anything is sent,
// to it or to the other triggers' servers; with no list, any server works,
// as in KubeElasti.
func TestAllowedServers(t *testing.T) {
	answers := promAnswers(`"1"`, map[string]string{"q": `"0"`})
	def, listed, other := newFakeProm(t, answers), newFakeProm(t, answers), newFakeProm(t, answers)
	list, err := ParseServerPrefixes(listed.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := Defaults{ServerAddress: def.URL, AuthorizationHeader: "Bearer op", AllowedServers: list}

	v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{
		trigger(`{"query":"q","threshold":"1"}`), promTrigger(listed.URL, "q", "1"), promTrigger(other.URL, "q", "1"),
	}, cooldown, d)
	if v.Idle || ReasonOf(err) != ReasonServerNotAllowed || v.Reason != ReasonServerNotAllowed {
		t.Fatalf("Evaluate = %+v, %v; want not idle with %s", v, err, ReasonServerNotAllowed)
	}
	if msg := err.Error(); !strings.Contains(msg, "triggers[2]") || !strings.Contains(msg, other.URL) || !strings.Contains(msg, "--prometheus-allowed-servers") {
		t.Errorf("error %q does not name the trigger, its server and the setting", msg)
	}
	for name, f := range map[string]*fakeProm{"refused": other, "default": def, "listed": listed} {
		if n := len(f.seen()); n != 0 {
			t.Errorf("the %s server got %d requests from a refused evaluation", name, n)
		}
	}

	// The default and listed servers are allowed; only the default one is
	// sent the operator's credential.
	v, err = Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{
		trigger(`{"query":"q","threshold":"1"}`), promTrigger(listed.URL+"/", "q", "1"),
	}, cooldown, d)
	if err != nil || !v.Idle {
		t.Fatalf("Evaluate = %+v, %v; want idle", v, err)
	}
	if len(def.seen()) == 0 || def.seen()[0].Header.Get("Authorization") != "Bearer op" {
		t.Errorf("default server requests %+v", def.seen())
	}
	if len(listed.seen()) == 0 || listed.seen()[0].Header.Get("Authorization") != "" {
		t.Errorf("listed server requests %+v", listed.seen())
	}

	// Without a list, any server.
	d.AllowedServers = nil
	if v, err := Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{promTrigger(other.URL, "q", "1")}, cooldown, d); err != nil || !v.Idle {
		t.Fatalf("without a list: Evaluate = %+v, %v; want idle", v, err)
	}

	// A listed server's error is classified, its text not quoted: a
	// shared server's text can name other namespaces' series.
	bad := newFakeProm(t, always(400, `{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`))
	d.AllowedServers, _ = ParseServerPrefixes(bad.URL)
	_, err = Evaluate(t.Context(), testClient(), []v1alpha1.ScaleTrigger{promTrigger(bad.URL, "q", "1")}, cooldown, d)
	if err == nil || !strings.Contains(err.Error(), "(bad_data): the query is not valid PromQL") || strings.Contains(err.Error(), "char 5") {
		t.Errorf("listed server's error = %v; want its class without its text", err)
	}
}
