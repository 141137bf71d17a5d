// Package release has no code of its own: its tests hold a release together
// without building an image or starting a cluster.
//
//   - Every container image in manifests/ and deploy/ has a tag (or digest)
//     and none is `latest`; elasti's own images carry the Makefile's VERSION,
//     which is also the Dockerfile's ARG VERSION.
//   - The Dockerfile's Go is the Go of go.mod's toolchain line, and its bases
//     are pinned by tag.
//   - The Dockerfile and `make build` run the same static go build, with the
//     linker flag that sets the version the binaries report.
//   - An image the Dockerfile builds has the entrypoint, user, binary path
//     and labels of the images `make images` builds (hack/images/oci), and
//     make images cross-compiles with the same build for the platforms
//     hack/images assembles.
//   - hack/set-image-tag.sh (make set-image-tag) keeps all of that true, and
//     refuses an empty tag or `latest`.
//
// make verify runs them (make verify-release).
package release
