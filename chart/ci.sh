#!/usr/bin/env bash
# Chart, fly.toml, Dockerfile, compose.yaml and .goreleaser.yaml tests. Run from the
# repository root (the main CI calls `bash chart/ci.sh`); the chart's tests are a separate Go
# module so that Helm, client-go and Prometheus's PromQL parser stay out of the service's
# go.mod. The release test builds the native release target as .goreleaser.yaml builds it
# (-short skips it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# Never let a go.work in the repository pull this module into another build list.
export GOWORK=off
go test -timeout 15m ./...
