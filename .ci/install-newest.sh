#!/usr/bin/env bash
# Makes <repo>/.venv-newest: spanledger and its test tools with the newest release of every
# supported SDK and framework (the `newest` extra, unpinned), upgraded on every run so a release
# published since the last run is the one tested. torch stays the CPU build the extra pins.
# tests/frameworks/test_newest_releases.py runs the recording tests in it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv-newest"
start=$SECONDS
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --upgrade --upgrade-strategy eager -e "$repo[newest]"
echo "install-newest: ready in $((SECONDS - start)) s"
