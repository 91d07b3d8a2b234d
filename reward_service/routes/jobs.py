"""/v1/jobs: submit a batch now, read its verdicts as they are decided, cancel it by id or by tag.

Results stream as NDJSON (``application/x-ndjson``): one JSON object per line, each a verdict with its item's
``index`` in the job, in the order they were decided. NDJSON rather than server-sent events because every HTTP
client reads it line by line with no parser of its own (``httpx.Response.iter_lines``, ``requests.iter_lines``,
``curl``), it is the same framing as a streamed ``/v1/verify``, and the clients that matter here are trainers, not
browsers (whose ``EventSource`` cannot send the bearer token anyway). A reader that lost its connection resumes
with ``?after=N`` (the number of lines it already has).
"""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from reward_service.deps import AdmissionDep, ServicesDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.jobs.manager import JobManager, JobRecord
from reward_service.routes.verify import group_stats, prepare_items, result_dict, starting_engine
from reward_service.schemas.item_limits import BodyFacts, check_limits
from reward_service.schemas.jobs import JobIn, JobOut, JobsDeleted, JobsListed
from reward_service.schemas.verify import VerifyItemIn, VerifyRequest
from reward_service.settings import Settings
from sandbox.api import run_client
from verifiers.base import Prepared
from verifiers.engine import Engine

router = APIRouter(tags=["jobs"])

NDJSON = "application/x-ndjson"
MAX_WAIT_S = 60.0


def open_manager(settings: Settings, engine: Engine) -> JobManager:
    """The server's job manager, scoring with ``engine`` and answering as ``/v1/verify`` does."""

    def prepare(bodies: list[dict[str, Any]]) -> list[Prepared]:
        return prepare_items(engine, VerifyRequest(items=[VerifyItemIn.model_validate(b) for b in bodies]))

    def finish(job: JobRecord) -> None:
        if job.groups_of is not None:
            job.groups = group_stats(job.groups_of, job.scores())

    return JobManager(settings.jobs, prepare, result_dict, finish)


def _manager(services: ServicesDep) -> JobManager:
    if services.jobs is None:
        raise ApiError(503, "server is starting", headers={"Retry-After": "1"})
    return services.jobs


def _job(manager: JobManager, job_id: str) -> JobRecord:
    found = manager.get(job_id)
    if isinstance(found, JobRecord):
        return found
    if found == "lost":
        raise ApiError(410, f"job {job_id} is lost: it was accepted by an earlier run of this server, which kept no "
                            "job store (jobs_store off); submit its items again", loc=["job_id"])
    raise ApiError(404, f"no job {job_id} (never accepted here, or its results expired after jobs_ttl_s)",
                   loc=["job_id"])


def job_out(manager: JobManager, job: JobRecord) -> dict[str, Any]:
    """The job without its results."""
    manager.flush()  # what a client sees is in the store: never decided again after a restart
    return {
        "id": job.id, "state": job.state, "priority": job.priority, "tags": job.tags, "created": job.created,
        "ended": job.ended, "expires": job.ended + manager.settings.ttl_s if job.ended is not None else None,
        "counts": job.counts(), "results": None, "groups": job.groups,
    }


def job_with_results(manager: JobManager, job: JobRecord) -> Response:
    """The job with its results so far, written from the verdicts' JSON text as it is held (a job of thousands of
    items is not parsed and encoded again for each poll)."""
    head = json.dumps({k: v for k, v in job_out(manager, job).items() if k != "results"})
    results = ", ".join(text if text is not None else "null" for text in job.texts)
    return Response(f'{head[:-1]}, "results": [{results}]}}', media_type="application/json")


@router.post("/v1/jobs", status_code=202, response_model=JobOut)
async def submit(body: JobIn, settings: SettingsDep, gate: AdmissionDep, services: ServicesDep,
                 request: Request) -> dict[str, Any]:
    batch = VerifyRequest(items=body.items)
    sent = await request.body()  # what the store keeps: the items as sent, not each encoded again
    check_limits(settings.limits, batch, BodyFacts.of(sent, settings.limits.max_number_digits))
    for i, tag in enumerate(body.tags):
        if not tag or len(tag) > settings.limits.max_id_chars:
            raise ApiError(422, f"tags[{i}] must have 1 to {settings.limits.max_id_chars} characters",
                           loc=["tags", i])
    prepared = prepare_items(starting_engine(gate), batch)
    gate.ready()  # 503 while draining
    manager = _manager(services)
    raw = await request.json()  # the body parsed when it was validated (the request keeps it)
    items = raw.get("items") if isinstance(raw, dict) else None
    if not isinstance(items, list) or len(items) != len(body.items):  # not what was validated: encode it afresh
        items = [i.model_dump(mode="json", exclude_unset=True) for i in body.items]
        sent = json.dumps({"items": items}).encode()
    client = run_client.get()
    job = manager.submit(str(client) if client is not None else "", body.priority, body.tags, items, prepared, sent)
    return job_out(manager, job)


@router.get("/v1/jobs", response_model=JobsListed)
async def listed(services: ServicesDep,
                 tag: Annotated[str | None, Query(min_length=1, description="Only the jobs with this tag")] = None,
                 limit: Annotated[int, Query(ge=1, le=1000, description="At most this many, newest first")] = 100,
                 ) -> dict[str, Any]:
    """The jobs held (unfinished, or ended within their TTL), without their results: what a trainer has in flight
    for a step or a run (its tag), before it cancels them."""
    manager = _manager(services)
    held = [job for job in manager.jobs.values() if tag is None or tag in job.tags]
    held.sort(key=lambda job: job.created, reverse=True)
    return {"jobs": [job_out(manager, job) for job in held[:limit]]}


@router.get("/v1/jobs/{job_id}", response_model=JobOut)
async def get(job_id: str, services: ServicesDep,
              wait: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="Long-poll: seconds to wait for the "
                                           "job to end before answering")] = 0.0,
              results: Annotated[bool, Query(description="Include the results so far")] = True
              ) -> dict[str, Any] | Response:
    manager = _manager(services)
    job = _job(manager, job_id)
    if wait > 0:
        await manager.wait(job, wait)
    return job_with_results(manager, job) if results else job_out(manager, job)


@router.get("/v1/jobs/{job_id}/results", response_class=StreamingResponse,
            responses={200: {"content": {NDJSON: {}}, "description": "One verdict per line, as decided."}})
async def results(job_id: str, services: ServicesDep,
                  after: Annotated[int, Query(ge=0, description="Skip the first N lines (resume)")] = 0
                  ) -> StreamingResponse:
    manager = _manager(services)
    job = _job(manager, job_id)

    async def lines() -> AsyncIterator[bytes]:
        async for decided in manager.stream(job, after):  # what is decided by now goes out in one write
            yield "".join(f'{{"index": {index}, {text[1:]}\n' for index, text in decided).encode()

    return StreamingResponse(lines(), media_type=NDJSON, headers={"X-Job-State": job.state})


@router.delete("/v1/jobs/{job_id}", response_model=JobsDeleted)
async def delete(job_id: str, services: ServicesDep) -> dict[str, Any]:
    manager = _manager(services)
    job = _job(manager, job_id)
    return {"cancelled": [job.id] if manager.cancel(job) else []}


@router.delete("/v1/jobs", response_model=JobsDeleted)
async def delete_tagged(services: ServicesDep,
                        tag: Annotated[str, Query(min_length=1, description="Cancel every unfinished job with "
                                                  "this tag")]) -> dict[str, Any]:
    return {"cancelled": _manager(services).cancel_tagged(tag)}
