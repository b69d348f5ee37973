# Regent's three images, each a static binary from `make build` on an empty base (`make images`
# builds both, with podman, buildah or docker):
#
#   make build && cp /etc/ssl/certs/ca-certificates.crt bin/
#   podman build --target broker   -t ghcr.io/regent-mq/regent-broker:0.1.0 .
#   podman build --target operator -t ghcr.io/regent-mq/regent-operator:0.1.0 .
#   podman build --target worker   -t ghcr.io/regent-mq/regent-worker:0.1.0 .
#
# Nothing is pulled from a registry: the base is scratch, and the build context (.dockerignore)
# holds only the binaries, the host's CA bundle and the passwd and group entries of the numeric
# user 65532. There is no shell and no package manager. The Helm chart runs the binaries with a
# read-only root filesystem, as that same user, and calls them by these paths.

FROM scratch AS base
COPY bin/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY hack/image/passwd hack/image/group /etc/
USER 65532:65532

FROM base AS broker
COPY bin/broker /broker
EXPOSE 6632 6633
ENTRYPOINT ["/broker"]

FROM base AS operator
COPY bin/operator /operator
EXPOSE 8080 8081
ENTRYPOINT ["/operator"]

# The worker the operator runs for a StreamQuery with a pipeline; the operator
# gives it its pipeline file, broker and token (see controllers/streamquery_workers.go).
FROM base AS worker
COPY bin/regent-worker /regent-worker
EXPOSE 8080
ENTRYPOINT ["/regent-worker"]
