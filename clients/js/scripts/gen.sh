#!/bin/sh
# Generates src/api.d.ts (the REST API's types) from the OpenAPI document the
# server serves (`switchboard openapi`, no database needed) with the pinned
# openapi-typescript. With --check, regenerates into a temp file and fails
# when it differs from the committed src/api.d.ts (the types drifted).
set -eu
cd "$(dirname "$0")/.."
root=${SWITCHBOARD_SOURCE:-../..}
export PATH="$PATH:/usr/local/go/bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go run ./cmd/switchboard openapi) > "$tmp/openapi.json"
./node_modules/.bin/openapi-typescript "$tmp/openapi.json" -o "$tmp/api.d.ts" >/dev/null
if [ "${1:-}" = --check ]; then
  if ! diff -u src/api.d.ts "$tmp/api.d.ts"; then
    echo "src/api.d.ts is out of date with the served OpenAPI document: run npm run gen and commit it" >&2
    exit 1
  fi
  echo "src/api.d.ts matches the served OpenAPI document"
else
  cp "$tmp/api.d.ts" src/api.d.ts
  echo "wrote src/api.d.ts"
fi
