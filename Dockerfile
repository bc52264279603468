# syntax=docker/dockerfile:1
#
# compactord container image: a static Go binary (CGO off) on distroless "static", running
# as the unprivileged user 65532. No HEALTHCHECK: Kubernetes probes the gRPC health service
# directly (k8s/base/deployment.yaml), and the image has no shell or client to run one.
#
#   docker build -t compactord:dev .
#   docker run --rm -p 50051:50051 -p 9090:9090 compactord:dev
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
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/compactord ./cmd/compactord

# distroless/static: CA certificates (HTTPS to LLM APIs, rediss://), tzdata and /etc/passwd
# entries for "nonroot", and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/compactord /usr/local/bin/compactord
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# gRPC (--listen) and Prometheus /metrics (--metrics-listen).
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/compactord"]

LABEL org.opencontainers.image.title="compactord" \
      org.opencontainers.image.description="Keeps LLM conversations inside their context windows (gRPC)" \
      org.opencontainers.image.source="https://github.com/compactord/compactord"
