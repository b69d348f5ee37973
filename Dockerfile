# syntax=docker/dockerfile:1
# Regent's two images, built from one source tree (`make images` builds both):
#
#   docker build --target broker   --build-arg VERSION=0.1.0 -t ghcr.io/regent-mq/regent-broker:0.1.0 .
#   docker build --target operator --build-arg VERSION=0.1.0 -t ghcr.io/regent-mq/regent-operator:0.1.0 .
#
# The binaries are static (CGO_ENABLED=0) and run on distroless "static" as the numeric user
# 65532, with nothing else in the image: no shell, no package manager. The Helm chart runs them
# with a read-only root filesystem, as that same user, and calls them by these paths.

ARG GO_VERSION=1.26

# Compiles for the target platform on the build platform, so multi-arch builds need no emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=dev
ENV CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    LDFLAGS="-s -w -X github.com/regent-mq/regent/broker/app.Version=${VERSION}"

FROM build AS build-broker
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "$LDFLAGS" -o /out/broker ./cmd/broker

FROM build AS build-operator
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "$LDFLAGS" -o /out/operator ./cmd/operator

FROM gcr.io/distroless/static-debian12:nonroot AS broker
COPY --from=build-broker /out/broker /broker
USER 65532:65532
EXPOSE 6632
ENTRYPOINT ["/broker"]

FROM gcr.io/distroless/static-debian12:nonroot AS operator
COPY --from=build-operator /out/operator /operator
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/operator"]
