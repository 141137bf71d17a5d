// Command images builds elasti's container images without Docker, from the
// binaries `make images` has cross-compiled into <bin>/<os>_<arch>/, and
// pushes them (`make push`). See package oci and docs/development/releases.md, "Images and
// releases". It is a build tool, not part of the product.
//
//	go run ./hack/images -version v0.1.0 -revision <commit> -source-date-epoch <unix> [-bin bin] [-out bin/images]
//	go run ./hack/images -version v0.1.0 -push registry.example.com/elasti [-out bin/images]
//	go run ./hack/images -version v0.1.0 -push registry.example.com/elasti -chart charts/elasti -helm <helm> [-chart-out bin/release] [-plain-http true]
//	go run ./hack/images -version v0.1.0 -source-date-epoch <unix> -plugin -plugin-url <url> [-bin bin] [-plugin-platforms linux/amd64,...] [-license LICENSE] [-chart-out bin/release]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/elasti-dev/elasti/hack/images/oci"
)

type options struct {
	bin, out   string
	repository string
	push       string
	meta       oci.Meta
	// make release: the chart to publish next to the images, where its
	// package goes, the helm that pushes it, and -plain-http.
	chart, chartOut, helm string
	plainHTTP             string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	var epoch int64
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.StringVar(&o.bin, "bin", "bin", "directory holding <os>_<arch>/<command> binaries")
	fs.StringVar(&o.out, "out", filepath.Join("bin", "images"), "where the OCI layouts, tarballs and SBOMs go (and -push reads the layouts)")
	fs.StringVar(&o.repository, "repository", oci.Repository, "the repository the tarballs and layouts name the images in")
	fs.StringVar(&o.push, "push", "", "push the layouts in -out to `REGISTRY`/<command>:<version> instead of building")
	fs.StringVar(&o.meta.Version, "version", "", "the release (the Makefile's VERSION): the tag and the version label")
	fs.StringVar(&o.meta.Revision, "revision", "", "the git commit built")
	fs.StringVar(&o.chart, "chart", "", "with -push: also publish this chart `DIR` to oci://REGISTRY, its values pinned to the pushed images")
	fs.StringVar(&o.chartOut, "chart-out", filepath.Join("bin", "release"), "where -chart's package (<name>-<version>.tgz) goes")
	fs.StringVar(&o.helm, "helm", "helm", "the helm binary that packages and pushes -chart")
	fs.StringVar(&o.plainHTTP, "plain-http", "", "reach REGISTRY over plain HTTP: true, false, or empty for only a loopback registry")
	fs.Int64Var(&epoch, "source-date-epoch", -1, "the commit time, in seconds since 1970: every timestamp in the images")
	var plugin bool
	var pluginPlatforms string
	var po pluginOptions
	fs.BoolVar(&plugin, "plugin", false, "instead of images: archive <bin>/<os>_<arch>/kubectl-elasti per platform and write krew's manifest "+pluginManifest+" with their sha256 sums, into -chart-out")
	fs.StringVar(&pluginPlatforms, "plugin-platforms", "linux/amd64,linux/arm64", "with -plugin: the platforms, os/arch, comma-separated")
	fs.StringVar(&po.url, "plugin-url", "", "with -plugin: the `URL` the archives will be downloaded from (the manifest's uri is URL/<archive>)")
	fs.StringVar(&po.license, "license", "", "with -plugin: a licence `FILE` to ship in each archive")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.meta.Version == "" {
		return errors.New("-version is required")
	}
	switch o.plainHTTP {
	case "", "true", "false":
	default:
		return fmt.Errorf("-plain-http %q: want true, false or empty", o.plainHTTP)
	}
	if o.chart != "" && o.push == "" {
		return errors.New("-chart needs -push")
	}
	if plugin {
		if epoch < 0 {
			return errors.New("-source-date-epoch is required with -plugin")
		}
		po.bin, po.out, po.version, po.created = o.bin, o.chartOut, o.meta.Version, time.Unix(epoch, 0).UTC()
		po.platforms = strings.Split(pluginPlatforms, ",")
		return packagePlugin(po, stdout)
	}
	if o.push != "" {
		return push(ctx, o, stdout)
	}
	if o.meta.Revision == "" || epoch < 0 {
		return errors.New("-revision and -source-date-epoch are required to build")
	}
	o.meta.Created = time.Unix(epoch, 0).UTC()
	return build(o, stdout)
}

// build writes, for each command, its OCI layout, and for each platform a
// docker-archive tarball and an SBOM.
func build(o options, stdout io.Writer) error {
	caRoots := oci.CAModule()
	if caRoots == nil {
		return errors.New("this program's build info does not name the CA roots' module; run it with go run or go build")
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for _, cmd := range oci.Commands {
		bins := map[string]string{}
		for _, p := range oci.Platforms {
			bins[p.String()] = filepath.Join(o.bin, oci.PlatformDir(p), cmd)
		}
		idx, err := oci.Index(cmd, bins, o.meta)
		if err != nil {
			return err
		}
		ref := oci.Reference(o.repository, cmd, o.meta.Version)
		if err := oci.WriteLayout(filepath.Join(o.out, cmd), idx, ref); err != nil {
			return fmt.Errorf("%s layout: %w", cmd, err)
		}
		digest, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s@%s\n", ref, digest)
		for _, p := range oci.Platforms {
			img, err := oci.PlatformImage(idx, p)
			if err != nil {
				return err
			}
			base := filepath.Join(o.out, cmd+"-"+p.Architecture)
			if err := oci.WriteTarball(base+".tar", img, ref); err != nil {
				return fmt.Errorf("%s %s tarball: %w", cmd, p, err)
			}
			imgDigest, err := img.Digest()
			if err != nil {
				return err
			}
			sbom, err := oci.SBOM(cmd, p, bins[p.String()], imgDigest, o.meta, caRoots)
			if err != nil {
				return err
			}
			if err := os.WriteFile(base+".spdx.json", sbom, 0o644); err != nil {
				return err
			}
			size, err := compressedSize(img)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "  %-12s %s  %.1f MiB compressed  %s.tar  %s.spdx.json\n", p, imgDigest, float64(size)/(1<<20), base, base)
		}
	}
	return nil
}

// compressedSize is what a pull of img downloads: manifest, config and
// compressed layers.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	size := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}

// push pushes each command's layout to registry/<command>:<version> and
// prints the reference to pin; with -chart, it then publishes the chart.
func push(ctx context.Context, o options, stdout io.Writer) error {
	registry := strings.TrimSuffix(o.push, "/")
	var opts []name.Option
	if plainHTTP(o.plainHTTP, registry) {
		opts = append(opts, name.Insecure)
	}
	var images []pushed
	for _, cmd := range oci.Commands {
		idx, err := oci.ReadLayout(filepath.Join(o.out, cmd))
		if err != nil {
			return fmt.Errorf("%s: %w (run make images first)", cmd, err)
		}
		// The layout is make images' last build; push it only under the tag
		// it was built as.
		m, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		if built := m.Annotations[oci.LabelVersion]; built != o.meta.Version {
			return fmt.Errorf("%s in %s is %s, not %s: run make images", cmd, o.out, built, o.meta.Version)
		}
		ref := oci.Reference(registry, cmd, o.meta.Version)
		digest, err := oci.Push(ctx, idx, ref, opts...)
		if err != nil {
			return fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Fprintf(stdout, "%s@%s\n", ref, digest)
		images = append(images, pushed{cmd: cmd, digest: digest.String()})
	}
	if o.chart == "" {
		return nil
	}
	return publishChart(ctx, o, registry, images, stdout)
}
