package command

import (
	"os"
	"strconv"
	"time"
)

// The apiserver connections' health check: client-go pings an HTTP/2
// connection on which nothing arrived for the read-idle timeout, and
// closes it when the ping is not answered within the ping timeout; its
// watches then reconnect and relist. Its defaults, 30 s and 15 s, leave a
// watch on a half-dead connection (a NAT entry or a load balancer gone,
// an apiserver host lost) deaf for 45 s, and every request a resolver
// holds meanwhile waits for a pod it cannot see become Ready. These find
// one within 8 s, for a ping every 5 s on a quiet connection.
const (
	APIServerReadIdleTimeout = 5 * time.Second
	APIServerPingTimeout     = 3 * time.Second
)

// The environment variables client-go reads its health check from
// (k8s.io/apimachinery/pkg/util/net).
const (
	envHTTP2ReadIdleTimeout = "HTTP2_READ_IDLE_TIMEOUT_SECONDS"
	envHTTP2PingTimeout     = "HTTP2_PING_TIMEOUT_SECONDS"
)

// CheckAPIServerConnections sets the health check's timeouts for the
// apiserver clients made after it, unless the environment sets them
// already (a user's value wins). Call it first in main.
func CheckAPIServerConnections() {
	for env, d := range map[string]time.Duration{envHTTP2ReadIdleTimeout: APIServerReadIdleTimeout, envHTTP2PingTimeout: APIServerPingTimeout} {
		if _, set := os.LookupEnv(env); !set {
			_ = os.Setenv(env, strconv.Itoa(int(d/time.Second)))
		}
	}
}
