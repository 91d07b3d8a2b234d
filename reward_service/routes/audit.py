"""POST /v1/audit (labelled or probe audit, JSON or HTML report) and GET /v1/calibration (the store's contents).

The API never writes reports to a path the caller names: the report comes back in the response, and ``store``
only writes rates into the server's own calibration store.
"""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from reward_service.deps import AdmissionDep, SettingsDep
from reward_service.errors import ApiError
from reward_service.schemas.item_limits import check_conversation, check_tools
from reward_service.schemas.verify import Message
from reward_service.settings import LimitsSettings
from verifiers.audit import AuditInputError, labelled_audit, probe_audit
from verifiers.audit.attacks import default_families
from verifiers.audit.probes import generate, parse_references
from verifiers.audit.report import render_html
from verifiers.calibration.apply import CALIBRATION

router = APIRouter(tags=["audit"])


class AuditRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["labelled", "probes"]
    verifier: str
    options: dict[str, Any] = Field(default_factory=dict, description="The verifier configuration audited.")
    items: list[dict[str, Any]] = Field(..., description='labelled: {"response", "reference", "label"}; '
                                                         'probes: {"reference"}.')
    store: bool = Field(False, description="labelled only: write the counts to the server's calibration store.")
    source: str | None = Field(None, max_length=200, description="Name of the stored counts (default 'api').")
    families: list[str] | None = Field(None, description="probes only: attack families (default: all that fit).")
    per_family: int | None = Field(None, ge=1, description="probes only: variants sampled per family and reference.")
    seed: int = 0
    format: Literal["json", "html"] = "json"


_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_TOOLS: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])


def check_trajectories(limits: LimitsSettings, rows: list[dict[str, Any]]) -> None:
    """Labelled rows carrying ``messages`` or ``tools`` meet the rules and limits of a verify item's (422 naming
    the row)."""
    for i, row in enumerate(rows):
        if row.get("messages") is None:
            if row.get("tools") is not None:
                try:
                    check_tools(limits, i, _TOOLS.validate_python(row["tools"]))
                except ValidationError as exc:
                    e = exc.errors()[0]
                    raise ApiError(422, f"items[{i}].tools.{'.'.join(map(str, e['loc']))}: {e['msg']}",
                                   loc=["items", i, "tools", *e["loc"]]) from None
            continue
        for name, adapter in (("messages", _MESSAGES), ("tools", _TOOLS)):
            try:
                if row.get(name) is not None:
                    adapter.validate_python(row[name])
            except ValidationError as exc:
                e = exc.errors()[0]
                at = ".".join(map(str, (name, *e["loc"])))
                raise ApiError(422, f"items[{i}].{at}: {e['msg']}", loc=["items", i, name, *e["loc"]]) from None
        messages = [{"content": None, **m.model_dump(exclude_none=True)} for m in _MESSAGES.validate_python(
            row["messages"])]
        check_conversation(limits, i, messages, row.get("tools"))


@router.post("/v1/audit", response_model=None)
async def audit(body: AuditRequest, settings: SettingsDep, gate: AdmissionDep) -> JSONResponse | HTMLResponse:
    engine = gate.ready().engine
    limit = settings.limits.max_batch_items
    try:
        if body.kind == "probes":  # count what will run before running it
            families = tuple(body.families) if body.families else default_families(body.verifier)
            n = len(generate(parse_references(body.items), families, per_family=body.per_family, seed=body.seed))
        else:
            n = len(body.items)
            check_trajectories(settings.limits, body.items)
        if n == 0:
            raise AuditInputError("the audit holds no rows")
        if n > limit:
            raise ApiError(413, f"the audit runs {n} items, over the limit of {limit}; use fewer rows, per_family, "
                           "or the CLI (reward-service audit)", loc=["items"])
        with gate.admit(n):
            if body.kind == "labelled":
                policy = engine.resources.get(CALIBRATION)
                store = policy.store if body.store and policy is not None else None
                if body.store and store is None:
                    raise ApiError(422, "store requested but this server has no calibration store", loc=["store"])
                report = await labelled_audit(engine, body.verifier, body.items, body.options, store=store,
                                              source=body.source or "api")
            else:
                report = await probe_audit(engine, body.verifier, body.items, body.options, families=body.families,
                                           per_family=body.per_family, seed=body.seed)
    except AuditInputError as exc:
        loc = ["items", exc.index] if exc.index is not None else None
        raise ApiError(422, str(exc), loc=loc) from None
    if body.format == "html":
        return HTMLResponse(render_html(report))
    return JSONResponse(report)


@router.get("/v1/calibration")
async def calibration(gate: AdmissionDep) -> dict[str, Any]:
    """Every verifier configuration the store knows, with ρ0, ρ1 and the online ρ1, each with its interval."""
    policy = gate.ready().engine.resources.get(CALIBRATION)
    if policy is None or policy.store is None:
        return {"entries": []}
    return {"entries": [cal.to_dict() for cal in policy.store.entries()]}
