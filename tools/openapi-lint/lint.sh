#!/usr/bin/env bash
# Lints the OpenAPI document the code serves with the pinned Redocly
# (recommended) and Spectral (spectral:oas) of package-lock.json, as JSON
# and as YAML. Fails on any error or warning. Needs go and npm.
set -euo pipefail
cd "$(dirname "$0")"
root=../..
(cd "$root" && go run ./cmd/switchboard openapi) > openapi.json
(cd "$root" && go run ./cmd/switchboard openapi --yaml) > openapi.yaml
npm ci --no-audit --no-fund --loglevel=error
echo "--- Redocly $(npx redocly --version 2>/dev/null | tail -n 1) (recommended)"
out=$(npx redocly lint openapi.json openapi.yaml 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -v -e '^\s*$' -e '║' -e '╔' -e '╚'
if echo "$out" | grep -q 'You have [0-9]* warning'; then echo "Redocly reported warnings" >&2; exit 1; fi
echo "--- Spectral $(npx spectral --version) (spectral:oas)"
npx spectral lint --ruleset .spectral.yaml --fail-severity=warn openapi.json openapi.yaml
