package command

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// VersionVariable is the linker path of the version string. make build and
// the Dockerfile set it to the Makefile's VERSION with
//
//	-ldflags "-X github.com/elasti-dev/elasti/pkg/command.version=v0.1.0"
const VersionVariable = "github.com/elasti-dev/elasti/pkg/command.version"

// version is the release this binary was built as; a plain go build or
// go run leaves it "devel".
var version = "devel"

// Version returns the release this binary was built as ("devel" unless the
// build set VersionVariable).
func Version() string { return version }

// VersionLine is what --version prints for the command name: its version,
// the Go release that built it, and the platform.
func VersionLine(name string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", name, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// BuildInfo returns the gauge elasti_build_info{binary,version,goversion},
// always 1, for a binary's metrics registry: a dashboard or an alert can
// tell which release each pod runs.
func BuildInfo(name string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "elasti_build_info",
		Help:        "Always 1; the labels say which elasti binary, release and Go version this process runs.",
		ConstLabels: prometheus.Labels{"binary": name, "version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
