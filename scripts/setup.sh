#!/usr/bin/env bash
# Install everything the service and its tests need on a fresh Debian machine with Python 3.11.
# Idempotent; safe to run again. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}

# System tools: bubblewrap isolates sandbox runs; chromium renders audit reports in tests; compilers for the
# sandbox's other languages are used when present. Skipped quietly when not root or without apt.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  missing=()
  command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # The compose CLI validates docker-compose.yml in the tests (no Docker engine is needed for that).
  command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi

# torch: pinned to the CPU build on disk; an unpinned torch would pull several GB of CUDA wheels.
"$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0"
"$PY" -m pip install -q --disable-pip-version-check -e ".[models,docker,ray,serve,parquet,rules,test,trainers,lint,environments,bfcl]" -e ./clients
# The trainers extra brings TRL; verl and OpenRLHF cannot install their full dependency sets on CPU (vllm, flash-attn,
# deepspeed, and transformers pins that clash with ours), so they go in without dependencies: the extra holds what
# their reward paths import, which is all tests/clients/test_trainer_{verl,openrlhf}.py drive.
"$PY" -m pip install -q --disable-pip-version-check --no-deps "verl==0.9.1" "openrlhf==0.11.2"
# BFCL's simulated APIs, multi-turn data and checker (verifiers/kinds/bfcl and its agreement tests): pinned, without
# its declared dependencies (vLLM-era pins and hosted-model SDKs the classes and the multi-turn checker never import).
"$PY" -m pip install -q --disable-pip-version-check --no-deps "bfcl-eval==2026.3.23"
