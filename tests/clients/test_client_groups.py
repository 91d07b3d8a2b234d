"""Client chunking never cuts a GRPO group: the server scores a group within one request, so a group split across
two requests would be scored as two smaller groups (consensus over half the votes, or ``group_too_small``)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from reward_client import AsyncRewardClient, RequestRejected, RewardClient, VerifyItem
from reward_client.protocol import chunks, split_point

from tests.support.batch import score_groups_whole
from tests.support.client import FAST, calls, script
from tests.support.consensus import _processbench_groups
from tests.support.server import LiveServer


def wire(groups: str) -> list[dict[str, Any]]:
    """One wire item per character: a letter is its group, ``-`` an ungrouped item."""
    return [{"id": str(k), **({} if g == "-" else {"group": g})} for k, g in enumerate(groups)]


def layout(items: list[dict[str, Any]], size: int) -> list[str]:
    out = []
    for offset, chunk in chunks(items, size):
        assert chunk == items[offset:offset + len(chunk)]
        out.append("".join(i.get("group", "-") for i in chunk))
    return out


def test_chunks_never_cut_a_group_and_cover_the_input_in_order() -> None:
    items = wire("aabbb--ccccccc-d")
    assert layout(items, 4) == ["aa", "bbb-", "-", "ccccccc", "-d"]
    assert [o for o, _ in chunks(items, 4)] == [0, 2, 6, 7, 14]
    assert layout(wire("aaaa" * 3), 4) == ["aaaa" * 3]  # one run: one group, however long
    assert layout(wire("aaaabbbbcccc"), 4) == ["aaaa", "bbbb", "cccc"]
    assert layout(wire("-" * 10), 4) == ["----", "----", "--"]  # ungrouped items: cut every `size`, as before
    assert layout(wire("ab" * 3), 4) == ["abab", "ab"]  # groups are runs; each run here is one item
    assert list(chunks([], 4)) == []


def test_split_point_is_the_group_boundary_nearest_the_middle() -> None:
    assert split_point(wire("aaaaabbc")) == 5
    assert split_point(wire("abbbbbbb")) == 1
    assert split_point(wire("------")) == 3
    assert split_point(wire("aaaa")) is None
    assert split_point(wire("a")) is None


def test_real_groups_across_chunk_boundaries_score_as_one_request(server: LiveServer, shared_data: Path) -> None:
    groups = _processbench_groups(shared_data, 4)
    assert len(groups) >= 10
    items = [VerifyItem("exact_match", "x", "x", id="lead")]  # shifts every group off the chunk grid
    for g, rows in enumerate(groups):
        items += [VerifyItem("consensus", r["response"], id=r["id"], group=f"g{g}") for r in rows]
    with RewardClient(server.url, chunk_size=5) as client:
        chunked = client.verify(items)
    with RewardClient(server.url, chunk_size=len(items)) as client:
        whole = client.verify(items)
    assert [r.id for r in chunked] == [i.id for i in items]
    assert [(r.score, r.status, r.details) for r in chunked] == [(r.score, r.status, r.details) for r in whole]
    assert not any(r.status == "group_too_small" for r in chunked)  # every group has 4+ responses
    sizes = {f"g{g}": len(rows) for g, rows in enumerate(groups)}
    assert all(r.details["group_size"] == sizes[i.group] for i, r in zip(items[1:], chunked[1:]))
    assert chunked[0].score == 1.0


def test_async_client_keeps_groups_whole_too(server: LiveServer) -> None:
    answers = {"p1": ["12", "\\boxed{12}", "12.0", "13"], "p2": ["7", "7", "7", "8", "9"]}
    items = [VerifyItem("consensus", f"The answer is {a}.", id=f"{p}-{k}", group=p)
             for p, values in answers.items() for k, a in enumerate(values)]

    async def go() -> list:
        async with AsyncRewardClient(server.url, chunk_size=3, max_concurrency=3) as client:
            return await client.verify(items)

    results = asyncio.run(go())
    assert [r.id for r in results] == [i.id for i in items]
    assert [r.score for r in results] == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert {r.details["votes"] for r in results[:4]} == {4} and {r.details["votes"] for r in results[4:]} == {5}


def test_a_413_halves_at_a_group_boundary(scripted: str) -> None:
    script(scripted, [], max_items=5)
    items = [VerifyItem("exact_match", str(k), str(k), id=f"{g}{k}", group=g)
             for g, n in (("a", 2), ("b", 4), ("c", 3), ("d", 1)) for k in range(n)]
    with RewardClient(scripted, chunk_size=16, retry=FAST) as client:
        results = client.verify(items)
    assert [r.id for r in results] == [i.id for i in items]
    served = [c["ids"] for c in calls(scripted) if c["n"] <= 5]
    assert [i for ids in served for i in ids] == [i.id for i in items]
    for ids in served:  # every group's items arrived in one request
        for g in "abcd":
            assert not any(i.startswith(g) for i in ids) or sum(i.startswith(g) for i in ids) == sum(
                i.id.startswith(g) for i in items)


def test_a_group_over_the_servers_limit_is_a_clear_error(scripted: str) -> None:
    script(scripted, [], max_items=5)
    items = [VerifyItem("exact_match", "1", "1", id="solo")] + [
        VerifyItem("exact_match", "1", "1", id=f"big{k}", group="big") for k in range(7)]
    with RewardClient(scripted, chunk_size=4, retry=FAST) as client:
        with pytest.raises(RequestRejected) as info:
            client.verify(items)
    assert info.value.status_code == 413
    assert "group 'big'" in info.value.message and "items[1:8]" in info.value.message
    assert "7 items" in info.value.message and "max_batch_items" in info.value.message


def test_score_command_through_a_server_keeps_groups_whole(server: LiveServer, tmp_path: Path) -> None:
    """``score --url``: batch chunks already keep a group's rows together, but a chunk that grew past
    ``--chunk-size`` to finish a group went to a client with that same chunk size, which cut it again."""
    score_groups_whole(tmp_path, "--url", server.url)
