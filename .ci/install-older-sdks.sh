#!/usr/bin/env bash
# Makes <repo>/.venv-older: spanledger with the `older-sdks` extra, the frameworks that pin SDKs
# older than the dev extra's (cohere 5.x, voyageai 0.3.x, openai 2.x) and an ollama release below
# its tested range. tests/frameworks/test_older_sdks.py runs tests/older_sdks in it.
# Idempotent: an existing .venv-older is brought up to date.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv-older"
start=$SECONDS
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$repo[older-sdks]"
echo "install-older-sdks: ready in $((SECONDS - start)) s"
