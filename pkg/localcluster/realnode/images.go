package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/elasti-dev/elasti/hack/images/oci"
)

// pauseMain is the sandbox's only process: it holds the pod's namespaces
// and sleeps until it is told to stop.
const pauseMain = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

// buildPauseImage compiles pauseMain statically and writes it as a
// docker-archive tarball of pauseImage in dir, assembled as elasti's own
// images are (hack/images/oci): an empty base, nonroot user. Its path is
// returned.
func buildPauseImage(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "pause-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(pauseMain), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module elasti.local/pause\n\ngo 1.26\n"), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "pause")
	if err := GoBuild(ctx, src, bin, "."); err != nil {
		return "", err
	}
	meta := oci.Meta{Version: "v1", Revision: "realnode", Created: time.Unix(0, 0)}
	return WriteImage(bin, "elasti-pause", pauseImage, filepath.Join(dir, "pause.tar"), meta)
}

// GoBuild builds pkg in module directory dir as elasti's images are built:
// static, trimmed, for this machine's architecture. ldflags are added to
// "-s -w".
func GoBuild(ctx context.Context, dir, out, pkg string, ldflags ...string) error {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", strings.Join(append([]string{"-s", "-w"}, ldflags...), " "), "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("realnode: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// WriteImage writes the binary bin as command cmd's image (hack/images/oci:
// the binary at /app, user 65532, elasti's base files) for this machine's
// platform, tagged ref, to the docker-archive tarball out, and returns out.
func WriteImage(bin, cmd, ref, out string, meta oci.Meta) (string, error) {
	img, err := oci.Image(cmd, v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, bin, meta)
	if err != nil {
		return "", fmt.Errorf("realnode: image %s: %w", ref, err)
	}
	if err := oci.WriteTarball(out, img, ref); err != nil {
		return "", fmt.Errorf("realnode: write %s: %w", out, err)
	}
	return out, nil
}

// SampleAppImage is the reference of the sample app's image
// (hack/sampleapp), which BuildSampleApp writes.
const SampleAppImage = "elasti.local/sampleapp:v1"

// BuildSampleApp builds hack/sampleapp from the repository at root as
// elasti's images are built and writes its image, tagged SampleAppImage,
// as a docker-archive tarball in dir; it returns the tarball.
func BuildSampleApp(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "sampleapp")
	if err := GoBuild(ctx, root, bin, "./hack/sampleapp"); err != nil {
		return "", err
	}
	meta := oci.Meta{Version: "v1", Revision: "realnode", Created: time.Unix(0, 0)}
	return WriteImage(bin, "sampleapp", SampleAppImage, filepath.Join(dir, "sampleapp.tar"), meta)
}
