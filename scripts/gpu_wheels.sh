#!/usr/bin/env bash
# Wheels the lent GPU machine lacks for benchmarks/prm_throughput.py (its image has torch and transformers but not
# pydantic, which the verifier library imports), fetched here for its Python 3.12 / x86-64 into .whl/ (ignored by
# git), then the command to run there. Usage: bash scripts/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
mkdir -p .whl
for spec in pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$spec"
done
ls .whl
cat <<'CMD'
run on the device (carry [".whl"]):
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD && PYTHONUNBUFFERED=1 python3 benchmarks/prm_throughput.py --preset 1.5b --preset 7b --json && cp benchmarks/results/prm_throughput.jsonl $OUT/
CMD
