#!/usr/bin/env bash
# Installs Arize Phoenix (the OTLP backend of tests/e2e) into its own virtualenv,
# <repo>/.venv-phoenix, kept apart from the project's .venv: Phoenix brings in many
# dependencies that could clash with the project's. Idempotent: does nothing when
# .venv-phoenix/bin/phoenix already exists.
#
# PHOENIX_PIP_SPEC overrides what is installed (default: arize-phoenix==20.26.1, the version
# tests/e2e was written against: its REST API shape and its gen_ai -> OpenInference mapping).
# PHOENIX_PYTHON overrides the interpreter the venv is made from (default: python3).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv-phoenix"
spec="${PHOENIX_PIP_SPEC:-arize-phoenix==20.26.1}"
python="${PHOENIX_PYTHON:-python3}"

if [[ -x "$venv/bin/phoenix" ]]; then
    echo "install-phoenix: $venv/bin/phoenix already present; nothing to do"
    exit 0
fi

start=$SECONDS
echo "install-phoenix: creating $venv and installing $spec"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"

if [[ ! -x "$venv/bin/phoenix" ]]; then
    echo "install-phoenix: $spec installed but $venv/bin/phoenix is missing" >&2
    exit 1
fi
echo "install-phoenix: done in $((SECONDS - start)) s ($("$venv/bin/python" -m pip show arize-phoenix | grep -i '^version'))"
