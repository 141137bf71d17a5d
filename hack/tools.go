//go:build tools

// Package hack pins build-time tools in go.mod so `go run`/codegen use the
// same versions everywhere.
package hack

import (
	_ "k8s.io/code-generator"
)
