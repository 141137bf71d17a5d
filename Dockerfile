# syntax=docker/dockerfile:1
#
# Builds one elasti binary, static (CGO_ENABLED=0), into a distroless image
# that runs as a non-root user:
#   docker build -t ghcr.io/elasti-dev/elasti-operator:$(make -s version) .
#   docker build --build-arg CMD=elasti-resolver -t ghcr.io/elasti-dev/elasti-resolver:$(make -s version) .
#
# Releases are built with `make images` instead (hack/images: no Docker,
# reproducible, both platforms, an SBOM). test/release holds this file's
# build, USER, ENTRYPOINT and labels to what make images produces.
#
# Both bases are pinned by version tag, and test/release's tests keep
# GO_VERSION equal to go.mod's toolchain line. A tag can still be re-pushed,
# so a release pins the bases by digest too, by overriding the ARGs with
# digests it has looked up itself at release time, e.g.
#   docker buildx imagetools inspect golang:1.26.8-bookworm   (prints "Digest: sha256:...")
#   docker build \
#     --build-arg GO_IMAGE=golang:1.26.8-bookworm@sha256:<digest> \
#     --build-arg RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:<digest> ...
# No digest is written here: none could be verified where this file was
# written (no registry is reachable there), and an unverified digest is
# worse than a tag. Keep the tag in front of the digest so the version stays
# readable.

# The Go that builds the binaries: go.mod's toolchain line, exactly.
ARG GO_VERSION=1.26.8
ARG GO_IMAGE=golang:${GO_VERSION}-bookworm
# Static binaries need no libc: distroless "static" on Debian 12, the
# variant whose default user is nonroot (65532).
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot
# The release the binary reports (--version, the Starting log line,
# elasti_build_info): the Makefile's VERSION and the tag of the images in
# manifests/. make set-image-tag rewrites this line with them.
ARG VERSION=v0.1.0

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS builder

# Which ./cmd/<CMD> to build.
ARG CMD=elasti-operator
ARG VERSION
ARG TARGETOS
ARG TARGETARCH

WORKDIR /src

# Dependencies first, in their own layer, so it is reused until go.mod or
# go.sum change.
# Only the product's module: no go.work, so the image builder's and the test
# bed's modules (hack/images, test/) play no part in the build.
COPY go.mod go.sum ./
RUN go mod download

# Sources; .dockerignore admits only the Go packages (cmd/, pkg/, internal/).
COPY . .

# The build cache is a BuildKit cache mount; /go/pkg/mod stays the layer
# above (a cache mount there would hide it). `make build` runs the same
# command (GO_BUILD_ENV, GO_BUILD_FLAGS); test/release checks they agree.
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/elasti-dev/elasti/pkg/command.version=${VERSION}" -o /out/app ./cmd/${CMD}

FROM ${RUNTIME_IMAGE}

ARG CMD=elasti-operator
ARG VERSION
# The commit and its time, as make images labels them; pass both:
#   --build-arg REVISION=$(git rev-parse HEAD)
#   --build-arg CREATED=$(date -u -d @$(git log -1 --format=%ct) +%Y-%m-%dT%H:%M:%SZ)
ARG REVISION
ARG CREATED
LABEL org.opencontainers.image.source="https://github.com/elasti-dev/elasti" \
      org.opencontainers.image.title="${CMD}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

COPY --from=builder /out/app /app
USER 65532:65532
ENTRYPOINT ["/app"]
