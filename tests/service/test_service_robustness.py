"""Hostile input that once wedged the service: deeply nested references (the pool retried an unpicklable job
forever) and lone surrogates. Each case is followed by a normal request that must be served at once."""
from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.server import LiveServer
from verifiers.engine.pool import WorkerPool
from verifiers.types import Status

NORMAL = {"verifier": "math", "response": "The answer is $\\boxed{42}$.", "reference": "42"}


def nested(depth: int) -> object:
    value: object = "42"
    for _ in range(depth):
        value = [value]
    return value


def nested_json(depth: int) -> str:
    """The JSON text of ``nested(depth)``, written out (json.dumps itself recurses)."""
    return "[" * depth + '"42"' + "]" * depth


def post(server: LiveServer, path: str, body: object) -> tuple[int, dict]:
    text = json.dumps(body) if not isinstance(body, str) else body
    with server.client(timeout=30) as c:
        r = c.post(path, content=text, headers={"content-type": "application/json"})
    return r.status_code, r.json()


@pytest.mark.parametrize("depth", [65, 300, 2000])
def test_deep_references_are_refused_and_service_goes_on(server: LiveServer, depth: int) -> None:
    item = json.dumps({**NORMAL, "reference": None}).replace("null", nested_json(depth))
    code, body = post(server, "/v1/verify", f'{{"items": [{item}]}}')
    assert code in (400, 422), body
    assert code != 500
    code, body = post(server, "/v1/verify", {"items": [NORMAL, NORMAL]})
    assert code == 200 and [r["score"] for r in body["results"]] == [1.0, 1.0]


def test_nesting_at_the_limit_is_scored_as_an_unusable_reference(server: LiveServer) -> None:
    code, body = post(server, "/v1/verify", {"items": [{**NORMAL, "reference": nested(63)}, NORMAL]})
    assert code == 200, body
    assert body["results"][0]["status"] == "invalid_reference" and body["results"][1]["score"] == 1.0


def test_deep_openrlhf_labels_are_refused_and_service_goes_on(server: LiveServer) -> None:
    query = "Q: what is 6*7?\nA: The answer is $\\boxed{42}$."
    for depth in (100, 1500):
        text = json.dumps({"query": [query], "labels": [None]}).replace("null", nested_json(depth))
        code, body = post(server, "/openrlhf/reward", text)
        assert code in (400, 422), body
    code, body = post(server, "/openrlhf/reward", {"query": [query], "labels": ["42"]})
    assert code == 200 and body["rewards"] == [1.0]


def test_an_unpicklable_job_is_answered_with_an_error_and_the_pool_keeps_serving() -> None:
    """Library use has no edge to refuse the input: the pool itself must not re-queue a job it can never send."""
    async def main() -> list:
        pool = WorkerPool(1, ["verifiers.kinds.math.verifier"])
        await pool.start()
        try:
            bad, good = await asyncio.gather(
                pool.run("math", "The answer is 42.", nested(5000), {}, 10.0),
                pool.run("math", "The answer is 42.", "42", {}, 10.0),
            )
            after = await asyncio.wait_for(pool.run("math", "The answer is 7.", "7", {}, 10.0), 20)
            return [bad, good, after]
        finally:
            await pool.close()

    bad, good, after = asyncio.run(main())
    assert bad.status is Status.ERROR and "cannot be sent" in bad.reason
    assert good.score == 1.0 and after.score == 1.0


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _raw_post(url: str, path: str, size: int, headers: str = "") -> int:
    """POST ``size`` bytes of body and return the status; the server may answer and close before the body is sent."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
                     f"Content-Length: {size}\r\n\r\n".encode())
        chunk = b'{"items": [' + b" " * (1 << 20)
        sent = 0
        try:
            while sent < size:
                piece = chunk[:size - sent]
                sock.sendall(piece)
                sent += len(piece)
        except OSError:
            pass  # answered and closed early: that is the point
        reply = b""
        while b"\r\n" not in reply:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
    return int(reply.split()[1])


def test_unauthenticated_bodies_are_refused_before_they_are_read(tmp_path) -> None:
    from tests.support.server import run_server

    with run_server(tmp_path, {"REWARD_SERVICE_AUTH_TOKEN": "s3cret", "REWARD_SERVICE_WORKERS": "1"}) as live:
        before = _rss_kb(live.proc.pid)
        for _ in range(3):
            assert _raw_post(live.url, "/v1/verify", 40 * 1024 * 1024) == 401
        assert _rss_kb(live.proc.pid) - before < 100 * 1024
        # /openrlhf: a body it could not even validate is still a 401 without the token, not a 422.
        with live.client() as c:
            assert c.post("/openrlhf/reward", json={"nonsense": 1}).status_code == 401
            assert c.post("/openrlhf/reward?token=wrong", json={"nonsense": 1}).status_code == 401
            assert c.post("/openrlhf/reward?token=s3cret", json={"nonsense": 1}).status_code == 422
            ok = c.post("/openrlhf/reward?token=s3cret", json={"query": ["The answer is 42."], "labels": ["42"]})
            assert ok.status_code == 200 and ok.json()["rewards"] == [1.0]
            r = c.post("/v1/verify", json={"items": [NORMAL]}, headers={"Authorization": "Bearer s3cret"})
            assert r.status_code == 200 and r.json()["results"][0]["score"] == 1.0
            assert c.get("/healthz").status_code == 200


def test_every_error_body_names_its_request(tmp_path) -> None:
    """4xx from routes, from validation, from the body-size limit and the token gate, and the id a client sent."""
    from tests.support.server import run_server

    env = {"REWARD_SERVICE_AUTH_TOKEN": "s3cret", "REWARD_SERVICE_WORKERS": "1",
           "REWARD_SERVICE_MAX_BODY_BYTES": "4096"}
    auth = {"Authorization": "Bearer s3cret"}
    with run_server(tmp_path, env) as live, live.client() as c:
        answers = [
            c.post("/v1/verify", json={"items": [NORMAL]}),  # token gate
            c.post("/v1/verify", json={"items": [{**NORMAL, "response": "x" * 8000}]}, headers=auth),  # size
            c.post("/v1/verify", json={"items": []}, headers=auth),  # route
            c.post("/v1/verify", json={"itemz": []}, headers=auth),  # validation
            c.post("/v1/verify", content=b"{not json", headers={**auth, "content-type": "application/json"}),
            c.get("/v1/nowhere", headers=auth),  # 404 outside any route
        ]
        assert [r.status_code for r in answers] == [401, 413, 422, 422, 400, 404]
        for r in answers:
            assert r.json()["request_id"] and r.json()["request_id"] == r.headers["x-request-id"], r.text
        mine = c.post("/v1/verify", json={"items": []}, headers={**auth, "X-Request-ID": "trainer-step-7"})
        assert mine.json()["request_id"] == "trainer-step-7"


@pytest.mark.parametrize("answer", ["\\sin(10^{10^{7}})", "\\tan(10^{100000})", "\\log(10^{10^{8}})",
                                    "\\sin(\\sin(10^{10^6}))", "\\cos(2^{2^{25}})"])
def test_functions_of_astronomical_arguments_are_refused_by_the_cost_guard(answer: str) -> None:
    """The size guard once judged these cheap (the value is small) while sympy needed minutes of precision: they
    held workers for whole deadlines and delayed other clients' items."""
    from verifiers.kinds.math.verifier import MathVerifier

    verifier = MathVerifier()
    verdict = verifier.check(f"The answer is $\\boxed{{{answer}}}$", "1", verifier.parse_options({}))
    assert verdict.score == 0.0 and verdict.details["method"] == "size_guard"
    ok = verifier.check("The answer is $\\boxed{\\sin(2^{10})}$", "\\sin(1024)", verifier.parse_options({}))
    assert ok.score == 1.0


def test_the_backlog_takes_turns_between_requests() -> None:
    """One request's long backlog does not hold back another request's item queued behind it."""
    from verifiers.engine.pool import Job

    async def main() -> tuple[list[float], float]:
        pool = WorkerPool(1, ["tests.support.plugins.testing_verifiers"], max_chunk=2)
        await pool.start()
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            done: dict[str, float] = {}

            async def one(key: str, source: str, seconds: float) -> None:
                await pool.submit(Job("test_sleep", "x", None, {"seconds": seconds}, 30.0, source=source))
                done[key] = loop.time() - started

            await asyncio.gather(*(one(f"slow{i}", "big-request", 0.25) for i in range(12)),
                                 one("fast", "small-request", 0.0))
            return sorted(done[f"slow{i}"] for i in range(12)), done["fast"]
        finally:
            await pool.close()

    slow, fast = asyncio.run(main())
    assert fast < slow[3], (fast, slow)  # served in the first chunks, not after the whole backlog


def test_deadlines_count_from_admission() -> None:
    """An item that waited out its deadline in the backlog is a timeout without being run."""
    from verifiers.engine.pool import Job

    async def main() -> tuple:
        pool = WorkerPool(1, ["tests.support.plugins.testing_verifiers"], max_chunk=1)
        await pool.start()
        try:
            first = asyncio.ensure_future(pool.submit(Job("test_sleep", "x", None, {"seconds": 1.0}, 10.0)))
            await asyncio.sleep(0.05)
            late = await pool.submit(Job("test_sleep", "x", None, {"seconds": 0.0}, 0.5))
            return await first, late, await pool.run("test_sleep", "x", None, {"seconds": 0.0}, 5.0)
        finally:
            await pool.close()

    first, late, after = asyncio.run(main())
    assert first.score == 1.0 and after.score == 1.0
    assert late.status is Status.TIMEOUT and "queue" in late.reason


def _hostile_bodies(n: int, seed: int = 0) -> list[str]:
    """Random JSON texts shaped like verify/openrlhf requests gone wrong: wrong types, unknown verifiers, huge or
    non-finite numbers, surrogates in values and keys, deep nesting, odd options, empty and truncated bodies."""
    import random

    rng = random.Random(seed)
    atoms: list[str] = ['"x"', "null", "true", "1e309", "-1e999", "NaN", "Infinity", "12345678901234567890123456789",
                        '"\\ud800"', '"\\udfff\\ud800"', '""', "[]", "{}", "0", "-0.0", '"\\u0000"',
                        '"' + "a" * 5000 + '"']

    def value(depth: int) -> str:
        roll = rng.random()
        if depth > 3 or roll < 0.5:
            return rng.choice(atoms)
        if roll < 0.7:
            return "[" + ",".join(value(depth + 1) for _ in range(rng.randint(0, 4))) + "]"
        if roll < 0.8:
            return "[" * rng.choice([10, 70, 300, 3000]) + "1" + "]" * rng.choice([10, 70, 300, 3000])
        keys = ['"response"', '"reference"', '"verifier"', '"options"', '"id"', '"group"', '"\\ud800"', '"timeout_s"']
        return "{" + ",".join(f"{rng.choice(keys)}: {value(depth + 1)}" for _ in range(rng.randint(0, 4))) + "}"

    bodies = []
    for _ in range(n):
        kind = rng.random()
        verifier = rng.choice(['"math"', '"exact_match"', '"regex"', '"nope"', '"spec"', "7", '"ifeval"',
                               '"multiple_choice"'])
        # drawn in the order the single f-string drew them, so each seed still builds the same bodies
        response, reference = value(2), value(1)
        options = rng.choice(["{}", value(1), '{"timeout_s": ' + rng.choice(atoms) + "}"])
        item = f'{{"verifier": {verifier}, "response": {response}, "reference": {reference}, "options": {options}}}'
        if kind < 0.6:
            body = f'{{"items": [{", ".join(item for _ in range(rng.randint(1, 3)))}]}}'
        elif kind < 0.8:
            body = f'{{"query": [{value(2)}], "labels": [{value(1)}], "prompts": {value(1)}}}'
        else:
            body = value(0)
        if rng.random() < 0.1:
            body = body[: rng.randint(0, len(body))]
        bodies.append(body)
    return bodies


@pytest.mark.parametrize("path, body, where", [
    ("/v1/audit", '{"kind": "labelled", "verifier": "math", "items": [{"response": "\\\\boxed{1}", '
                  '"reference": "\\ud800", "label": true}]}', "items[0].reference"),
    ("/v1/sandbox/run", '{"code": "print(1)", "id": "\\ud800"}', "id"),
    ("/v1/sandbox/run_batch", '{"items": [{"code": "print(1)"}, {"code": "print(\'\\udc00\')"}]}', "items[1].code"),
    ("/run_code", '{"code": "print(1)", "language": "python", "files": {"\\ud800": "eA=="}}', "files."),
    ("/openrlhf/reward", '{"query": ["q \\ud800"], "labels": ["1"]}', "query[0]"),
])
def test_lone_surrogates_are_a_422_on_every_route(server: LiveServer, path: str, body: str, where: str) -> None:
    """Valid JSON, not valid Unicode: every route refuses it at the edge, naming where it is (an answer echoing it
    could not be encoded: a 500)."""
    status, answer = post(server, path, body)
    assert status == 422 and answer["detail"].startswith(where) and "surrogate" in answer["detail"], answer
    status, answer = post(server, "/v1/verify", {"items": [NORMAL]})
    assert status == 200 and answer["results"][0]["score"] == 1.0


def test_two_hundred_hostile_bodies_never_give_a_500_and_service_goes_on(server: LiveServer) -> None:
    codes: list[int] = []
    with server.client(timeout=60) as c:
        for i, body in enumerate(_hostile_bodies(200)):
            path = "/openrlhf/reward" if '"query"' in body[:12] else "/v1/verify"
            r = c.post(path, content=body.encode("utf-8", "surrogatepass"),
                       headers={"content-type": "application/json"})
            codes.append(r.status_code)
            assert r.status_code < 500, (i, r.status_code, r.text[:300], body[:300])
        normal = c.post("/v1/verify", json={"items": [NORMAL] * 4})
    assert normal.status_code == 200 and [x["score"] for x in normal.json()["results"]] == [1.0] * 4
    assert len(set(codes)) > 2  # the bodies really differ in what is wrong with them


def test_an_endless_header_is_refused_with_431_and_the_server_goes_on(server: LiveServer) -> None:
    """httptools keeps an incomplete request head in memory with no bound: one connection streaming a header without
    end grew the server by its size. Past MAX_HEAD_BYTES the head is refused and the connection closed; a request
    whose head arrives together with a large body in one write is not affected."""
    import socket
    from urllib.parse import urlparse

    from reward_service.middleware import MAX_HEAD_BYTES

    url = urlparse(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent, answer = 0, b""
        try:
            while sent < 4 * MAX_HEAD_BYTES:
                s.sendall(b"a" * 65536)
                sent += 65536
        except OSError:  # the server closed the connection while we were still sending
            pass
        try:
            while chunk := s.recv(4096):
                answer += chunk
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    body = json.dumps({"items": [{**NORMAL, "response": "x" * 500_000 + " The answer is $\\boxed{42}$."}]}).encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        s.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nconnection: close\r\n"
                  b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    status, answer_json = post(server, "/v1/verify", {"items": [NORMAL]})
    assert status == 200 and answer_json["results"][0]["score"] == 1.0
