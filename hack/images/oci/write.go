package oci

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// refName is the OCI layout annotation naming an index; containerd's
// `ctr images import` takes the image name from it.
const refName = "org.opencontainers.image.ref.name"

// WriteLayout writes idx as the only index of a fresh OCI image layout in
// dir, named ref.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: ref}))
}

// ReadLayout returns the index WriteLayout wrote in dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d entries, want the one index make images writes", dir, len(m.Manifests))
	}
	return top.ImageIndex(m.Manifests[0].Digest)
}

// PlatformImage returns idx's image for p.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Equals(p) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s", p)
}

// WriteTarball writes img to path as a docker-archive (what `docker load`,
// `ctr images import` and crane read) tagged ref.
func WriteTarball(path string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}

// Push writes idx to ref (repository:tag) and returns the digest to pin.
// Credentials come from the Docker config (docker login, credential
// helpers) as for docker push; a loopback or private-address registry is
// spoken to over plain HTTP, and any other with name.Insecure in opts
// (make release's PLAIN_HTTP=true).
func Push(ctx context.Context, idx v1.ImageIndex, ref string, opts ...name.Option) (v1.Hash, error) {
	tag, err := name.NewTag(ref, append(opts, name.StrictValidation)...)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}
