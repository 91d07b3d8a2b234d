"""``prm`` and ``orm``: the configured reward models as verifiers of /v1/verify.

The reference slot carries the prompt (a reward model has no gold answer): a string, or a mapping with
``prompt`` (or ``question`` / ``problem``); ``options.prompt`` overrides it. Scores are continuous, so neither
verifier is binary.
"""
from __future__ import annotations

from typing import Any, TypeVar

from pydantic import Field

from verifiers.base import BaseOptions, Verifier
from verifiers.context import Context
from verifiers.kinds.reward_models.aggregate import Aggregation, aggregate, first_error, step_rewards
from verifiers.kinds.reward_models.hub import MODELS
from verifiers.kinds.reward_models.steps import SplitRule, split_steps
from verifiers.types import Verdict, VerifierError, VerifierFailed, VerifierUnavailable


def prompt_of(reference: Any, explicit: str | None) -> str:
    if explicit is not None:
        return explicit
    if isinstance(reference, str):
        return reference
    if isinstance(reference, dict):
        for key in ("prompt", "question", "problem"):
            if isinstance(value := reference.get(key), str):
                return value
    return ""


def _hub_and_model(ctx: Context, wanted: str | None, kind: str) -> tuple[Any, str]:
    hub = ctx.resource(MODELS)
    if wanted is None:
        names = hub.names(kind)
        if not names:
            raise VerifierUnavailable(f"no {kind.upper()} is configured on this server")
        return hub, names[0]
    try:
        spec = hub.spec(wanted)
    except KeyError as exc:
        raise VerifierUnavailable(str(exc)) from None
    if spec.kind != kind:
        raise VerifierUnavailable(f"reward model {wanted!r} is a {spec.kind.upper()}, not a {kind.upper()}")
    return hub, wanted


def _failed(exc: BaseException, model: str) -> VerifierError:
    """What an item's scoring ended with, as the exception the engine names: a server that is down is
    ``unavailable`` (never a 0); anything else is an ``error``."""
    failed: VerifierError
    if isinstance(exc, VerifierUnavailable):
        failed = VerifierUnavailable(f"reward model unavailable: {str(exc)[:300]}", model=model)
    else:
        failed = VerifierFailed(f"reward model failed: {type(exc).__name__}: {str(exc)[:300]}", model=model)
    failed.__cause__ = exc
    return failed


OptionsT = TypeVar("OptionsT", bound=BaseOptions)


class _ModelVerifier(Verifier[OptionsT]):
    """Shared traits: awaited on the event loop (the batcher does the work), continuous scores, and a deadline
    that leaves room for queueing behind other callers' batches."""

    version = "1"
    execution = "async"
    binary = False
    default_timeout_s = 120.0


class PrmOptions(BaseOptions):
    model: str | None = Field(None, description="Configured PRM name (default: the first PRM).")
    aggregation: Aggregation = Field("min", description="min, prod, mean, last, sum, clip or delta.")
    threshold: float = Field(0.5, description="A step below it is an error (first_error; clip's eta).")
    split: SplitRule | None = Field(None, description="Step split rule (default: the model's).")
    prompt: str | None = Field(None, description="The problem; overrides the reference.")
    steps: list[str] | None = Field(
        None, min_length=1,
        description="The steps, already split (/v1/prm/score's 'steps'); the response is then not read.")


class PrmVerifier(_ModelVerifier[PrmOptions]):
    name = "prm"
    description = "Process reward model: scores each reasoning step, aggregates them (min/prod/mean/last/...)."
    Options = PrmOptions

    async def acheck(self, response: str, reference: Any, options: PrmOptions, ctx: Context) -> Verdict:
        hub, model = _hub_and_model(ctx, options.model, "prm")
        steps = options.steps or split_steps(response, options.split or hub.spec(model).split)
        if not steps:
            return Verdict.no_answer("the response holds no steps", model=model)
        [result] = await hub.score_steps(model, [(prompt_of(reference, options.prompt), steps)])
        if isinstance(result, BaseException):
            raise _failed(result, model)
        score = aggregate(result, options.aggregation, options.threshold)
        return Verdict.ok(
            score, f"{options.aggregation} over {len(steps)} steps", model=model, step_scores=result,
            first_error=first_error(result, options.threshold),
            step_rewards=step_rewards(result, options.aggregation, options.threshold),
        )


class OrmOptions(BaseOptions):
    model: str | None = Field(None, description="Configured ORM name (default: the first ORM).")
    prompt: str | None = Field(None, description="The prompt; overrides the reference.")


class OrmVerifier(_ModelVerifier[OrmOptions]):
    name = "orm"
    description = "Outcome reward model: one scalar for the whole response (sequence classification)."
    Options = OrmOptions

    async def acheck(self, response: str, reference: Any, options: OrmOptions, ctx: Context) -> Verdict:
        hub, model = _hub_and_model(ctx, options.model, "orm")
        if not response.strip():
            return Verdict.no_answer("empty response", model=model)
        [result] = await hub.score_responses(model, [(prompt_of(reference, options.prompt), response)])
        if isinstance(result, BaseException):
            raise _failed(result, model)
        return Verdict.ok(result, "outcome reward model score", model=model)


VERIFIERS: list[Verifier[Any]] = [PrmVerifier(), OrmVerifier()]
