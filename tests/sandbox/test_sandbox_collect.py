"""What ``collect`` (and /run_code's ``fetch_files``) may bring back: at most MAX_COLLECT names, every file cut at
the run's output budget taken together, an inode sent once (hard links cost a tmpfs nothing and multiplied what left
the sandbox), and a named status when anything was cut; the host keeps no more than the budget whatever it is sent."""
from __future__ import annotations

import base64
import shutil

import pytest

from sandbox.bwrap.frames import Frames
from sandbox.paths import MAX_COLLECT
from tests.support.server import LiveServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

LINKS = 63
MIB = 1 << 20

HARD_LINKS = f"""
import os
with open("big", "wb") as f:
    f.write(b"x" * {MIB})
for i in range({LINKS}):
    os.link("big", f"link{{i}}")
print("planted")
"""


def test_hard_links_to_one_file_come_back_once(server: LiveServer) -> None:
    names = ["big", *(f"link{i}" for i in range(LINKS))]
    body = {"code": HARD_LINKS, "collect": names, "limits": {"disk_mb": 4}}
    with server.client(timeout=60) as c:
        r = c.post("/v1/sandbox/run", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["stdout"] == "planted\n", out
    assert list(out["files"]) == ["big"] and len(out["files"]["big"]) == MIB
    assert "'link0' is the same file as 'big'" in out["reason"]
    assert len(r.content) < 2 * MIB, f"a {len(r.content)}-byte answer for one 1 MiB file"


def test_all_collected_files_share_the_runs_output_budget(server: LiveServer) -> None:
    code = "for i in range(10):\n    open(f'f{i}', 'w').write(str(i) * 16384)\n"
    body = {"code": code, "collect": [f"f{i}" for i in range(10)], "limits": {"output_bytes": 40000}}
    with server.client(timeout=60) as c:
        out = c.post("/v1/sandbox/run", json=body).json()
    kept = sum(len(v) for v in out["files"].values())
    assert kept == 40000, out["reason"]
    assert out["files"]["f0"] == "0" * 16384 and out["files"]["f1"] == "1" * 16384
    assert out["files"]["f2"] == "2" * (40000 - 2 * 16384)
    assert set(out["files"]) == {"f0", "f1", "f2"}
    assert out["status"] == "output_exceeded" and out["truncated"] is True
    assert "'f2' cut at 7232 of its 16384 bytes" in out["reason"]
    assert "'f3' (16384 bytes) left out" in out["reason"]


def test_files_within_the_budget_are_an_ok_run(server: LiveServer) -> None:
    code = "open('a.txt', 'w').write('hello')\nopen('b.txt', 'w').write('world')\n"
    with server.client(timeout=60) as c:
        out = c.post("/v1/sandbox/run", json={"code": code, "collect": ["a.txt", "b.txt", "absent"]}).json()
    assert out["status"] == "ok" and out["truncated"] is False and out["reason"] == ""
    assert out["files"] == {"a.txt": "hello", "b.txt": "world"}


@pytest.mark.parametrize("collect, needle", [
    ([f"f{i}" for i in range(MAX_COLLECT + 1)], f"over the limit of {MAX_COLLECT}"),
    (["a.txt", "./a.txt"], "name the same file"),
])
def test_collect_lists_over_the_limits_are_422(server: LiveServer, collect: list[str], needle: str) -> None:
    with server.client() as c:
        r = c.post("/v1/sandbox/run", json={"code": "print(1)", "collect": collect})
        assert r.status_code == 422 and needle in r.text and "collect" in r.text, r.text
        r = c.post("/run_code", json={"code": "print(1)", "language": "python", "fetch_files": collect})
        assert r.status_code == 422 and needle in r.text and "fetch_files" in r.text, r.text


def test_run_code_fetch_files_through_hard_links_come_back_once(server: LiveServer) -> None:
    names = ["big", *(f"link{i}" for i in range(LINKS))]
    with server.client(timeout=60) as c:
        r = c.post("/run_code", json={"code": HARD_LINKS, "language": "python", "fetch_files": names})
    assert r.status_code == 200, r.text
    out = r.json()
    assert list(out["files"]) == ["big"] and base64.b64decode(out["files"]["big"]) == b"x" * MIB
    assert len(r.content) < 3 * MIB


def test_the_host_keeps_no_more_than_the_budget_whatever_it_is_sent() -> None:
    frames = Frames()

    def frame(name: str, contents: bytes) -> bytes:
        return len(name).to_bytes(2, "little") + name.encode() + contents

    for i in range(5):
        frames.collected(frame(f"f{i}", b"y" * 300), budget=1000)
    assert list(frames.files) == ["f0", "f1", "f2", "f3"] and frames.files["f3"] == "y" * 100
    assert frames.file_bytes == 1000 and frames.over_budget
    nuls = Frames()
    nuls.collected(frame("z", bytes(600)), budget=1200)  # a NUL is six bytes in the JSON answer
    assert nuls.files["z"] == "\0" * 200 and nuls.over_budget
