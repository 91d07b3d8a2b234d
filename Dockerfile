# CPU image of reward-service (see docker-compose.yml). Multi-stage: wheels are built in the first stage, the
# runtime stage has no compilers.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY reward_service ./reward_service
COPY verifiers ./verifiers
COPY sandbox ./sandbox
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[parquet]"

FROM python:3.11-slim-bookworm
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 reward
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER reward
ENV REWARD_SERVICE_HOST=0.0.0.0 REWARD_SERVICE_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD curl -fsS http://127.0.0.1:8000/readyz || exit 1
ENTRYPOINT ["reward-service", "serve"]
