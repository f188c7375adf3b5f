#!/usr/bin/env bash
# Chart, fly.toml, Dockerfile, compose.yaml and .goreleaser.yaml tests. Run from the
# repository root (the main CI calls `bash chart/ci.sh`); the chart's tests are a separate Go
# module so that Helm and client-go stay out of the service's go.mod. The release test
# cross-compiles the four release targets as .goreleaser.yaml builds them (-short skips it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# Never let a go.work in the repository pull this module into another build list.
export GOWORK=off
# The release test builds four binaries: minutes on two cores, beyond go test's default 10m on a busy machine.
go test -timeout 30m ./...
