package triggers

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"golang.org/x/net/idna"
)

// ServerPrefix is a Prometheus server as the operator's settings name it:
// a scheme, a host, a port and a path prefix. A trigger's server is at a
// prefix when the scheme, host and port are the same and its path is the
// prefix's path or below it, segment by segment: http://prom:9090/prom
// covers http://prom:9090/prom and http://prom:9090/prom/x, not
// http://prom:9090/prometheus. User information, query and fragment
// choose no other server and play no part.
type ServerPrefix struct {
	scheme, host, port, path string
}

// String is the prefix as a URL, for messages.
func (s ServerPrefix) String() string {
	return s.scheme + "://" + net.JoinHostPort(s.host, s.port) + s.path
}

// contains reports whether t, a trigger's server, is at or below s.
func (s ServerPrefix) contains(t ServerPrefix) bool {
	return s.scheme == t.scheme && s.host == t.host && s.port == t.port &&
		(s.path == "" || t.path == s.path || strings.HasPrefix(t.path, s.path+"/"))
}

// ParseServerPrefix reads one entry of --prometheus-allowed-servers: an
// absolute http or https URL with a host, an optional port (the scheme's
// default when left out) and an optional path prefix. An entry with user
// information, a query or a fragment is refused rather than silently
// ignored, since it would suggest a match on them.
func ParseServerPrefix(entry string) (ServerPrefix, error) {
	u, err := url.Parse(entry)
	if err != nil {
		return ServerPrefix{}, fmt.Errorf("%q is not a valid URL", truncate(entry, 128))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return ServerPrefix{}, fmt.Errorf("%q is not an absolute http or https URL, such as http://prometheus.monitoring:9090", truncate(redactURL(entry), 128))
	case u.User != nil:
		return ServerPrefix{}, fmt.Errorf("%q has user information; name the server only", truncate(redactURL(entry), 128))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return ServerPrefix{}, fmt.Errorf("%q has a query or fragment; name the server and path prefix only", truncate(redactURL(entry), 128))
	}
	return prefixOf(u), nil
}

// ParseServerPrefixes reads --prometheus-allowed-servers: entries separated
// by commas, blanks around them ignored. An empty list allows any server.
func ParseServerPrefixes(list string) ([]ServerPrefix, error) {
	var out []ServerPrefix
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := ParseServerPrefix(entry)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// prefixOf is the server a request to u reaches: the address net/http
// dials for it (see dialHost) and u's path. Host names are compared as
// written, in ASCII lower case (DNS and /etc/hosts ignore ASCII case):
// prometheus.monitoring and prometheus.monitoring.svc.cluster.local are
// different servers here even where DNS makes them the same one, and so are
// prom and prom., which a resolver with search domains may send to
// different addresses. A Host header plays no part: checkHostHeader refuses
// one that names another server than u, so the server a trigger is taken
// for is always the one its requests are sent to.
func prefixOf(u *url.URL) ServerPrefix {
	port := u.Port()
	if port == "" {
		port = defaultPort[u.Scheme]
	}
	// The query URL is JoinPath'd, which cleans the path; compare what is
	// sent. "/" and "" are both the root.
	p := strings.TrimSuffix(path.Clean("/"+u.Path), "/")
	return ServerPrefix{scheme: u.Scheme, host: dialHost(u.Hostname()), port: port, path: p}
}

// defaultPort is the port net/http dials for a URL without one.
var defaultPort = map[string]string{"http": "80", "https": "443"}

// dialHost is the host name net/http's Transport dials for a URL whose
// Hostname() is h (its canonicalAddr): h itself when it is ASCII, else its
// IDNA lookup form when there is one, so that "ｐrom" and "prom", which
// dial the same host, are one server. Only ASCII letters are lowered:
// where IDNA refuses h, net/http dials it as written, and strings.ToLower
// would map some non-ASCII letters (the Kelvin sign) to ASCII ones that
// name another host.
func dialHost(h string) string {
	if !isASCII(h) {
		if a, err := idna.Lookup.ToASCII(h); err == nil {
			h = a
		}
	}
	return lowerASCII(h)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// dialAddress is the host:port net/http dials for a request to s, in the
// form its Transport hands the dialer (host lower-cased).
func (s ServerPrefix) dialAddress() string {
	return net.JoinHostPort(s.host, s.port)
}

// serverOf is the server a trigger at addr reaches, or false when addr is
// not an absolute http or https URL.
func serverOf(addr string) (ServerPrefix, bool) {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return ServerPrefix{}, false
	}
	return prefixOf(u), true
}

// checkHostHeader refuses a trigger's Host header that names another server
// than its URL, addr. Query sends such a header as the request's Host; the
// connection still goes to addr's host, but a reverse proxy there routes by
// Host, and a server's identity has to be one thing: the address dialled.
// The header is equal when its host, in ASCII lower case and IDNA lookup
// form, and its port, the scheme's default when left out, are the URL's.
// Anything else (another name, a trailing dot the URL lacks, an IPv6
// address without brackets, percent-encoding, a path or user information)
// is refused rather than guessed at. Every Host entry counts, whatever its
// case: the map may hold "host" and "HOST" both. The value is quoted,
// shortened: a host name is no secret.
func checkHostHeader(addr string, headers map[string]string) error {
	want, ok := serverOf(addr)
	if !ok {
		return nil // checkServerAddress says what is wrong
	}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if http.CanonicalHeaderKey(name) != "Host" {
			continue
		}
		value := headers[name]
		if value == "" {
			continue // net/http then sends the URL's host
		}
		host, port, ok := splitHostHeader(value)
		if port == "" {
			port = defaultPort[want.scheme]
		}
		if !ok || dialHost(host) != want.host || port != want.port {
			return fmt.Errorf("header %q is %q, which names another server than serverAddress %s; "+
				"a trigger's server is the one its requests connect to, so set that address as serverAddress",
				truncate(name, 64), truncate(value, 128), want.String())
		}
	}
	return nil
}

// splitHostHeader reads a Host header value as host and optional port:
// "name", "name:port", "[v6]" or "[v6]:port". ok is false for anything
// else, such as a bare IPv6 address or a value with a path, user
// information or percent-encoding.
func splitHostHeader(v string) (host, port string, ok bool) {
	if strings.ContainsAny(v, "%@/?#\\ \t") {
		return "", "", false
	}
	if rest, found := strings.CutPrefix(v, "["); found {
		host, rest, found = strings.Cut(rest, "]")
		if !found || !strings.Contains(host, ":") || strings.Contains(host, "[") {
			return "", "", false
		}
		if rest != "" {
			if port, found = strings.CutPrefix(rest, ":"); !found {
				return "", "", false
			}
		}
		return host, port, isDigits(port)
	}
	if strings.Count(v, ":") > 1 || strings.Contains(v, "]") {
		return "", "", false
	}
	host, port, _ = strings.Cut(v, ":")
	return host, port, host != "" && isDigits(port)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isDefaultServer reports whether server is the operator's default server
// address or below it. The default Authorization header goes only there:
// it is the operator's credential for its own Prometheus, and an
// ElastiService author who names another server must not receive it.
func isDefaultServer(server string, defaultAddr string) bool {
	if strings.TrimSpace(defaultAddr) == "" {
		return false
	}
	def, ok := serverOf(strings.TrimSpace(defaultAddr))
	if !ok {
		return false
	}
	t, ok := serverOf(server)
	return ok && def.contains(t)
}

// isListed reports whether server is at one of the prefixes in list.
func isListed(server string, list []ServerPrefix) bool {
	if len(list) == 0 {
		return false
	}
	t, ok := serverOf(server)
	if !ok {
		return false
	}
	for _, p := range list {
		if p.contains(t) {
			return true
		}
	}
	return false
}
