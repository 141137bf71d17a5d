package e2e

import (
	"crypto/sha1" //nolint:gosec // the WebSocket handshake is defined with SHA-1
	"encoding/base64"
)

func sha1Sum(s string) string {
	sum := sha1.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}
