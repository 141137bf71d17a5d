package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

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

// Image is an image built from this tree, written as a docker-archive
// tarball for ImportImage.
type Image struct {
	// Tarball is the docker-archive file; Ref its tag.
	Tarball, Ref string
	// Version is the version linked in and labelled.
	Version string
	// ID is the image's config digest ("sha256:…"), which the CRI reports
	// as a container's imageID for an imported image.
	ID string
}

// SampleAppImage is the reference of the sample app's image
// (hack/sampleapp), which BuildSampleApp writes.
const SampleAppImage = "elasti.local/sampleapp:v1"

// BuildSampleApp builds hack/sampleapp from the repository at root as
// elasti's images are built and writes its image, tagged SampleAppImage,
// in dir.
func BuildSampleApp(ctx context.Context, root, dir string) (Image, error) {
	return buildImage(ctx, root, dir, "./hack/sampleapp", "sampleapp", SampleAppImage,
		oci.Meta{Version: "v1", Revision: "realnode", Created: time.Unix(0, 0)})
}

// BuildElastiImage builds command cmd ("elasti-operator" or
// "elasti-resolver") from the repository at root as `make images` does
// (static, the Makefile's VERSION linked in, hack/images/oci's assembly)
// for this machine's platform only, tagged as manifests/ name it, in dir.
func BuildElastiImage(ctx context.Context, root, cmd, dir string) (Image, error) {
	return buildElastiImage(ctx, root, cmd, dir, "")
}

// BuildBaselineImage builds command cmd as BuildElastiImage does, but from
// another checkout, root, and tagged apart (the version with the suffix
// "-baseline"), so a benchmark can run this tree's command and that one's
// side by side on one node.
func BuildBaselineImage(ctx context.Context, root, cmd, dir string) (Image, error) {
	return buildElastiImage(ctx, root, cmd, dir, "-baseline")
}

func buildElastiImage(ctx context.Context, root, cmd, dir, tagSuffix string) (Image, error) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return Image{}, err
	}
	m := regexp.MustCompile(`(?m)^VERSION := (\S+)$`).FindSubmatch(mk)
	if m == nil {
		return Image{}, errors.New("realnode: no VERSION := line in the Makefile")
	}
	version := string(m[1])
	if tagSuffix != "" {
		// Its own file too: dir may hold this tree's image of cmd.
		dir = filepath.Join(dir, "baseline")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Image{}, err
		}
	}
	return buildImage(ctx, root, dir, "./cmd/"+cmd, cmd, oci.Reference(oci.Repository, cmd, version+tagSuffix),
		oci.Meta{Version: version, Revision: "realnode-test", Created: time.Unix(0, 0)},
		"-X github.com/elasti-dev/elasti/pkg/command.version="+version)
}

func buildImage(ctx context.Context, root, dir, pkg, cmd, ref string, meta oci.Meta, ldflags ...string) (Image, error) {
	bin := filepath.Join(dir, cmd)
	if err := GoBuild(ctx, root, bin, pkg, ldflags...); err != nil {
		return Image{}, err
	}
	return imageOf(bin, cmd, ref, dir, meta)
}

// imageOf writes the static binary bin as command cmd's image, tagged ref,
// to a tarball in dir.
func imageOf(bin, cmd, ref, dir string, meta oci.Meta) (Image, error) {
	tar, err := WriteImage(bin, cmd, ref, filepath.Join(dir, cmd+".tar"), meta)
	if err != nil {
		return Image{}, err
	}
	img, err := tarball.ImageFromPath(tar, nil)
	if err != nil {
		return Image{}, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return Image{}, err
	}
	return Image{Tarball: tar, Ref: ref, Version: meta.Version, ID: id.String()}, nil
}
