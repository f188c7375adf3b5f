#!/usr/bin/env bash
# Chart, fly.toml and Dockerfile tests. Run from the repository root (the main CI calls
# `bash chart/ci.sh`); the chart's tests are a separate Go module so that Helm and
# client-go stay out of the service's go.mod.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# Never let a go.work in the repository pull this module into another build list.
export GOWORK=off
go test ./...
