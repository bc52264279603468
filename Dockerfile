# syntax=docker/dockerfile:1
#
# compactord container image: a static Go binary (CGO off) on distroless "static", running
# as the unprivileged user 65532. No HEALTHCHECK: Kubernetes probes the gRPC health service
# directly (k8s/base/deployment.yaml), and the image has no shell or client to run one.
#
#   make docker          # docker build with VERSION and REVISION from git: compactord --version
#   docker run --rm -p 127.0.0.1:50051:50051 -p 127.0.0.1:9090:9090 compactord:dev
#
# The image listens on every interface of its container (COMPACTORD_LISTEN and
# COMPACTORD_METRICS_LISTEN below; compactord's own default is loopback while --auth=none,
# which no port mapping reaches), and warns at start while authentication is off.
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 -t ... .
# (the build stage runs natively and cross-compiles; no emulation needed).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
# The context has no .git: the version and commit come in as build arguments (make docker).
ARG VERSION=
ARG REVISION=
# The flags of `make build` (Makefile: BUILD_FLAGS, LDFLAGS).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -tags grpcnotrace -buildvcs=false \
      -ldflags="-s -w -X main.buildVersion=${VERSION} -X main.buildRevision=${REVISION}" \
      -o /out/compactord ./cmd/compactord

# distroless/static: CA certificates (HTTPS to LLM APIs, rediss://), tzdata and /etc/passwd
# entries for "nonroot", and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/compactord /usr/local/bin/compactord
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# gRPC (--listen) and Prometheus /metrics (--metrics-listen), on every interface of the
# container: reachable through a port mapping or a Service.
ENV COMPACTORD_LISTEN=:50051 COMPACTORD_METRICS_LISTEN=:9090
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/compactord"]

LABEL org.opencontainers.image.title="compactord" \
      org.opencontainers.image.description="Keeps LLM conversations inside their context windows (gRPC)" \
      org.opencontainers.image.source="https://github.com/compactord/compactord"
