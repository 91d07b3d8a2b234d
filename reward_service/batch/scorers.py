"""The two ways to verify a chunk of items: the in-process engine (same code path as the server) or a server URL.

Both return one verdict dict per item, in order, and turn a per-item refusal (unknown verifier, options that do
not fit) into that item's ``error`` instead of failing the chunk.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from reward_service.batch.rows import Item, Result, complete, error_result
from reward_service.errors import ApiError
from reward_service.schemas.item_limits import check_item
from reward_service.schemas.verify import VerifyItemIn
from reward_service.settings import LimitsSettings
from verifiers.engine import Engine
from verifiers.engine.registry import UnknownVerifier
from verifiers.types import VerifyItem


class EmbeddedScorer:
    def __init__(self, engine: Engine, limits: LimitsSettings | None = None) -> None:
        self.engine = engine
        self.limits = limits or LimitsSettings()

    def library_item(self, item: Item) -> VerifyItem:
        """A trajectory or an item with tool specs meets the server's rules and limits (``ApiError`` naming what is
        wrong); a plain item goes as is."""
        if "messages" not in item and "tools" not in item:
            return VerifyItem(**item)
        try:
            checked = VerifyItemIn.model_validate(item)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            what = "trajectory" if "messages" in item else "item"
            raise ApiError(422, f"{what} invalid: {problems}") from None
        check_item(self.limits, 0, checked)
        return checked.to_verify_item()

    async def __call__(self, items: list[Item]) -> list[Result]:
        results: list[Result | None] = [None] * len(items)
        positions, prepared = [], []
        for i, item in enumerate(items):
            try:
                prepared.append(self.engine.prepare(self.library_item(item)))
                positions.append(i)
            except ApiError as exc:
                results[i] = error_result(exc.message.removeprefix("items[0]").lstrip(".: "))
            except UnknownVerifier as exc:
                results[i] = error_result(str(exc))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
                results[i] = error_result(f"options invalid for {item['verifier']!r}: {problems}")
        verdicts = await self.engine.verify_many(prepared) if prepared else []
        for i, verdict in zip(positions, verdicts):
            results[i] = verdict.to_dict()
        return complete(results, "items")


class RemoteScorer:
    """Through ``reward_client.AsyncRewardClient`` (chunking and retries live there)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __call__(self, items: list[Item]) -> list[Result]:
        from reward_client import RequestRejected

        results: list[Result | None] = [None] * len(items)
        live = list(range(len(items)))
        while live:
            try:
                verdicts = await self.client.verify([items[i] for i in live])
            except RequestRejected as exc:
                bad = exc.loc[1] if exc.loc and len(exc.loc) >= 2 and isinstance(exc.loc[1], int) else None
                if bad is None or exc.status_code not in (413, 422) or bad >= len(live):
                    raise
                results[live.pop(bad)] = error_result(exc.message)
                continue
            for i, v in zip(live, verdicts):
                results[i] = {"score": v.score, "status": v.status, "reason": v.reason, "details": v.details,
                              "turn_scores": v.turn_scores}
            break
        return complete(results, "items")
