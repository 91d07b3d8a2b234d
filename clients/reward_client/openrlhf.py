"""OpenRLHF adapter: a file usable as ``--reward.remote_url /path/to/reward_client/openrlhf.py``.

OpenRLHF 0.11 can reach the service two ways. ``--reward.remote_url http://HOST:8000/openrlhf/reward`` needs no
code, but OpenRLHF's own HTTP client tries 5 times a second apart and then leaves the reward None, so a restart of
the service costs the samples scored meanwhile. Given this file instead, OpenRLHF calls ``reward_func(queries,
prompts, labels)`` once per sample from a thread; here those calls are coalesced into batched requests to the same
``/openrlhf/reward`` route and retried through an outage for ``REWARD_CLIENT_RETRY_BUDGET_S`` (300 s by default).
Settings come from the environment (``REWARD_CLIENT_URL``, ``REWARD_CLIENT_TOKEN``), since OpenRLHF passes none;
``REWARD_CLIENT_URL`` may list several instances separated by commas, which then share the work.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reward_client.client import AsyncRewardClient
from reward_client.coalesce import shared_coalescer
from reward_client.errors import RequestRejected
from reward_client.protocol import ClientConfig
from reward_client.retry import trainer_policy

PATH = "/openrlhf/reward"


async def _send(client: AsyncRewardClient, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One route call for many samples, answered per sample (each list in the response sliced to its entry)."""
    body = {"query": [s["query"] for s in samples], "prompts": [s["prompt"] for s in samples],
            "labels": [s["label"] for s in samples]}
    answer = await client.request_json("POST", PATH, body)
    n = len(samples)
    rewards = answer.get("rewards") if isinstance(answer, dict) else None
    if not isinstance(rewards, list) or len(rewards) != n:
        raise RequestRejected(200, f"expected {n} rewards, got {answer!r:.200}", None, PATH)
    scores = answer.get("scores") if isinstance(answer.get("scores"), list) else rewards
    logs = answer.get("extra_logs") if isinstance(answer.get("extra_logs"), dict) else {}
    return [
        {"reward": rewards[i], "score": scores[i],
         "logs": {k: v[i] if isinstance(v, list) and len(v) == n else v for k, v in logs.items()}}
        for i in range(n)
    ]


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[Any] | None = None,
                **_: Any) -> dict[str, Any]:
    """OpenRLHF's custom reward entry: the route's answer shape (``rewards``, ``scores``, ``extra_logs``)."""
    labels = list(labels) if labels is not None else [None] * len(queries)
    samples = [{"query": q, "prompt": p, "label": lab} for q, p, lab in zip(queries, prompts, labels)]
    parts = shared_coalescer(ClientConfig(retry=trainer_policy())).run("openrlhf", samples, _send)
    keys = sorted({k for part in parts for k in part["logs"]})
    return {
        "rewards": [part["reward"] for part in parts],
        "scores": [part["score"] for part in parts],
        "extra_logs": {k: [part["logs"].get(k, 0.0) for part in parts] for k in keys},
    }
