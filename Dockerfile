# CPU image of reward-service. Multi-stage: wheels are built in the first stage; the runtime stage has no compilers.
# Build:  docker build -t reward-service .
# The sandbox (bubblewrap) needs the security options listed in docker-compose.yml.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reward_service ./reward_service
COPY verifiers ./verifiers
COPY sandbox ./sandbox
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[parquet,docker,bfcl,sandbox-libs]"
# BFCL's simulated APIs and data (the bfcl verifier and environment), without its declared vLLM-era dependencies.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /bfcl-wheels "bfcl-eval==2026.3.23"

FROM ${PYTHON_IMAGE}
# bubblewrap isolates sandbox runs; LANGUAGES_APT holds the sandbox's toolchains and the libraries their test suites
# import (sandbox/language_table.py, docs/sandbox.md; "" for a Python-only image), EXTRA_APT anything more.
ARG LANGUAGES_APT="gcc g++ libc6-dev default-jdk-headless nodejs npm golang-go rustc mono-devel php-cli lua5.4 \
    lua-unit r-base-core libtest-deep-perl ruby ruby-test-unit scala kotlin racket ldc iverilog ghc ocaml-nox elixir \
    gfortran libjavatuples-java junit4 cargo librust-rand+default-dev librust-regex+default-dev librust-md5+default-dev"
ARG EXTRA_APT=""
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ${LANGUAGES_APT} ${EXTRA_APT} \
    && if command -v npm >/dev/null; then npm install -g --no-audit --no-fund typescript@5 @types/node@20 lodash \
        && mkdir -p /usr/local/share/reward-sandbox/jest \
        && npm install --prefix /usr/local/share/reward-sandbox/jest --no-audit --no-fund --save-exact jest@29.7.0 \
            babel-jest@29.7.0 @babel/core@7.29.13 @babel/preset-env@7.29.14 @babel/preset-typescript@7.29.7; fi \
    && rm -rf /var/lib/apt/lists/* /root/.npm \
    && useradd --create-home --uid 10001 reward \
    && mkdir -p /data /models && chown reward:reward /data /models
# rand, regex and md5 built for the sandbox's Rust programs (HumanEval-X's declarations use them)
COPY scripts/rust_crates.sh /tmp/rust_crates.sh
RUN bash /tmp/rust_crates.sh && rm -rf /tmp/rust_crates.sh
COPY --from=build /wheels /wheels
COPY --from=build /bfcl-wheels /bfcl-wheels
RUN pip install --no-cache-dir /wheels/*.whl && pip install --no-cache-dir --no-deps /bfcl-wheels/*.whl \
    && rm -rf /wheels /bfcl-wheels
USER reward
WORKDIR /home/reward
ENV REWARD_SERVICE_HOST=0.0.0.0 \
    REWARD_SERVICE_PORT=8000 \
    PYTHONUNBUFFERED=1
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('REWARD_SERVICE_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["reward-service", "serve"]
