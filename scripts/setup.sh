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
  # The sandbox's languages (sandbox/language_table.py): each toolchain as "a command it installs:its packages".
  # Debian 12 has no Julia and no Swift language (its "swift" is OpenStack's); docs/sandbox.md says so.
  for pair in go:golang-go mcs:mono-devel php:php-cli lua5.4:lua5.4 Rscript:r-base-core ruby:ruby \
      scalac:scala kotlinc:kotlin racket:racket ldc2:ldc iverilog:iverilog ghc:ghc ocamlopt:ocaml-nox \
      elixir:elixir gfortran:gfortran node:nodejs npm:npm gcc:gcc g++:g++ javac:default-jdk-headless \
      rustc:rustc cargo:cargo; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
  done
  # libraries the languages' test suites import (MultiPL-E: luaunit, Test::Deep, test/unit; javatuples, JUnit 4)
  for pair in /usr/share/lua/5.4/luaunit.lua:lua-unit /usr/share/perl5/Test/Deep.pm:libtest-deep-perl \
      /usr/share/java/javatuples.jar:libjavatuples-java /usr/share/java/junit4.jar:junit4; do
    [ -e "${pair%%:*}" ] || missing+=("${pair#*:}")
  done
  ruby -e 'require "test/unit/assertions"' >/dev/null 2>&1 || missing+=(ruby-test-unit)
  # the Rust crates HumanEval-X's declarations use (rand, regex, md5), as Debian's crate sources with their default
  # features; scripts/rust_crates.sh builds them below
  for pkg in librust-rand+default-dev librust-regex+default-dev librust-md5+default-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # TypeScript's compiler and Node's types, and lodash for JavaScript programs (global: the sandbox sees /usr)
  if command -v npm >/dev/null 2>&1; then
    root=$(npm root -g)
    [ -d "$root/typescript" ] && [ -d "$root/@types/node" ] && [ -d "$root/lodash" ] \
      || npm install -g --no-audit --no-fund -s typescript@5 @types/node@20 lodash >/dev/null
  fi
  # jest and Babel for the jest test mode (sandbox/language_table.py: JEST_HOME), pinned, in a directory of their own
  # that the sandbox sees read-only under /usr
  jest_home=/usr/local/share/reward-sandbox/jest
  if command -v npm >/dev/null 2>&1 && [ ! -f "$jest_home/node_modules/jest/package.json" ]; then
    mkdir -p "$jest_home"
    npm install --prefix "$jest_home" --no-audit --no-fund --save-exact -s jest@29.7.0 babel-jest@29.7.0 \
      @babel/core@7.29.13 @babel/preset-env@7.29.14 @babel/preset-typescript@7.29.7 >/dev/null
    chmod -R a+rX "$jest_home"
  fi
  # testify for Go tests (HumanEval-X's import it), from the shared data's vendored copy: GOPATH mode finds it there
  testify=/usr/local/share/reward-sandbox/go/src
  vendor=../shared/data/code/humaneval-x/go-vendor.tar.gz
  if [ ! -d "$testify/github.com/stretchr/testify" ] && [ -f "$vendor" ]; then
    mkdir -p "$testify" && tar -xzf "$vendor" -C "$testify" --strip-components=2 ./vendor
  fi
  # a Go build cache holding testify and its dependencies, built with the sandbox's Go settings
  # (sandbox/language_table.py); each run copies it into its own tmpfs (sandbox/support/go_warm.sh)
  warm=/usr/local/share/reward-sandbox/go-cache
  if [ ! -d "$warm" ] && [ -d "$testify/github.com/stretchr/testify" ] && command -v go >/dev/null 2>&1; then
    build=$(mktemp -d)
    printf 'package main\nimport (\n "testing"\n "github.com/stretchr/testify/assert"\n)\nfunc TestX(t *testing.T) { assert.True(t, true) }\n' > "$build/main_test.go"
    printf 'package main\nimport "fmt"\nfunc main() { fmt.Println(1) }\n' > "$build/main.go"
    (cd "$build" && env GOCACHE="$warm" GOPATH=/tmp/go:/usr/local/share/reward-sandbox/go CGO_ENABLED=0 \
        GOFLAGS=-mod=mod GO111MODULE=off GOTOOLCHAIN=local go test -c -o t main_test.go \
      && env GOCACHE="$warm" GOPATH=/tmp/go:/usr/local/share/reward-sandbox/go CGO_ENABLED=0 GOFLAGS=-mod=mod \
        GO111MODULE=off GOTOOLCHAIN=local go build -o m main.go)
    rm -rf "$build"; chmod -R a+rX "$warm"
  fi
  # rlibs of those crates, built offline with the rustc on PATH (the one the sandbox uses), redone when it changes
  bash scripts/rust_crates.sh || echo "setup: the sandbox's Rust crates did not build; Rust programs using them fail" >&2
fi

# torch: pinned to the CPU build on disk; an unpinned torch would pull several GB of CUDA wheels.
"$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0"
"$PY" -m pip install -q --disable-pip-version-check -e ".[models,docker,ray,serve,parquet,rules,test,trainers,lint,environments,bfcl,sandbox-libs]" -e ./clients
# The trainers extra brings TRL; verl and OpenRLHF cannot install their full dependency sets on CPU (vllm, flash-attn,
# deepspeed, and transformers pins that clash with ours), so they go in without dependencies: the extra holds what
# their reward paths import, which is all tests/clients/test_trainer_{verl,openrlhf}.py drive.
"$PY" -m pip install -q --disable-pip-version-check --no-deps "verl==0.9.1" "openrlhf==0.11.2"
# BFCL's simulated APIs, multi-turn data and checker (verifiers/kinds/bfcl and its agreement tests): pinned, without
# its declared dependencies (vLLM-era pins and hosted-model SDKs the classes and the multi-turn checker never import).
"$PY" -m pip install -q --disable-pip-version-check --no-deps "bfcl-eval==2026.3.23"
