# syntax=docker/dockerfile:1
#
# Switchboard: one static binary on a distroless, non-root base.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t switchboard .
# The image's ENTRYPOINT is the binary; its arguments pick the subcommand:
#   serve (default CMD), migrate, admin, version.

# Keep the minor version in step with the go directive of go.mod (checked by chart tests).
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
# Dependencies first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
# The commit, for switchboard_build_info (.git is not in the build context).
ARG REVISION=""
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/switchboard ./cmd/switchboard

# distroless/static: no shell, no package manager; ships CA certificates (webhooks over
# TLS) and tzdata (task timezones). :nonroot runs as uid/gid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="switchboard" \
      org.opencontainers.image.description="Scheduled and on-demand jobs, an OpenAPI front and WebSocket delivery on PostgreSQL" \
      org.opencontainers.image.source="https://github.com/switchboard/switchboard" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/switchboard /usr/local/bin/switchboard
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["switchboard"]
CMD ["serve"]
