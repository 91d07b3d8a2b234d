"""Thin client for reward-service: httpx only, no torch, installable on its own."""
from reward_client.client import AsyncRewardClient, RewardClient
from reward_client.errors import (
    RequestRejected,
    RewardServiceError,
    ServerError,
    ServiceUnavailable,
    ServiceUnreachable,
)
from reward_client.items import PrmItem, SandboxRun, VerifyItem
from reward_client.results import PrmResult, SandboxResult, VerifyResult
from reward_client.retry import RetryPolicy

__version__ = "0.1.0"
__all__ = [
    "AsyncRewardClient", "RewardClient", "RequestRejected", "RewardServiceError", "ServerError",
    "ServiceUnavailable", "ServiceUnreachable", "PrmItem", "SandboxRun", "VerifyItem", "PrmResult", "SandboxResult",
    "VerifyResult", "RetryPolicy",
]
