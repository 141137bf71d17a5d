# syntax=docker/dockerfile:1
#
# Builds one elasti binary into a distroless, non-root image.
#   docker build -t ghcr.io/elasti-dev/elasti-operator:dev .
#   docker build --build-arg CMD=elasti-resolver -t ghcr.io/elasti-dev/elasti-resolver:dev .

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder

# Which ./cmd/<CMD> to build.
ARG CMD=elasti-operator
# The release the binary reports (--version, elasti_build_info): the
# Makefile's VERSION and the tag of the images in manifests/. make
# set-image-tag rewrites this line with them.
ARG VERSION=v0.1.0
ARG TARGETOS
ARG TARGETARCH

WORKDIR /src

# Dependencies first, in their own layer, so it is reused until go.mod or
# go.sum change.
COPY go.mod go.sum ./
RUN go mod download

# Sources; .dockerignore admits only the Go packages (cmd/, pkg/, internal/).
COPY . .

# The build cache is a BuildKit cache mount; /go/pkg/mod stays the layer
# above (a cache mount there would hide it).
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X github.com/elasti-dev/elasti/pkg/command.version=${VERSION}" -o /out/app ./cmd/${CMD}

FROM gcr.io/distroless/static:nonroot

ARG CMD=elasti-operator
LABEL org.opencontainers.image.source="https://github.com/elasti-dev/elasti" \
      org.opencontainers.image.title="${CMD}"

COPY --from=builder /out/app /app
USER 65532:65532
ENTRYPOINT ["/app"]
