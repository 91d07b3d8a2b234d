"""Attacks on the sandbox's service edge (collect, the output budget as sent), through a real server and the real
bubblewrap sandbox. Each test asserts the safe outcome."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.server import LiveServer, run_server

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

MIB = 1 << 20

# collect opens each name under the work dir with O_NOFOLLOW on the last component only: a directory symlink the
# program planted reaches the rest of its own mount namespace (the run manager's /proc/self, pid 1's files, base
# files, a FIFO). None of that may hang the run, hand over the manager's memory or environment, or be another run's.
PLANT_LINKS = """
import os
os.symlink('/proc/self', 'p')
os.symlink('/proc/1', 'one')
os.symlink('/', 'r')
os.mkfifo('fifo')
print('planted')
"""
THROUGH_LINKS = ["p/environ", "p/mem", "p/maps", "p/cmdline", "p/fd/0", "p/fd/3", "one/environ", "one/mem",
                 "one/auxv", "r/proc/self/environ", "r/proc/kcore", "r/dev/zero", "fifo", "r/tmp/x", "r/work/x"]


def test_collect_through_planted_directory_links_returns_nothing_of_the_manager(server: LiveServer) -> None:
    with server.client(timeout=60) as c:
        r = c.post("/v1/sandbox/run", json={"code": PLANT_LINKS, "collect": THROUGH_LINKS})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "ok" and out["stdout"] == "planted\n", out
    assert all(v == "" for v in out["files"].values()), {k: v[:80] for k, v in out["files"].items()}


# The output budget counts the bytes the program wrote; the answer carries them as JSON text, where a NUL (or any
# other control character) is six bytes (\\u0000). A program writing its budget of NULs on stdout and stderr and in a
# collected file made the server build and send about six times the budget per stream (198 MiB for a 16 MiB budget,
# ~900 MiB peak RSS), and /v1/sandbox/run_batch multiplies that by up to max_batch_items.
# Invalid UTF-8 bytes do the same at three bytes each (U+FFFD).
NULS = "import os\nz = {byte!r} * {n}\nopen('f', 'wb').write(z)\nos.write(1, z)\nos.write(2, z)\n"


@pytest.mark.parametrize("byte", [b"\0", b"\xff", b"\x1b"])
def test_an_answer_carries_no_more_than_its_output_budget_as_sent(server: LiveServer, byte: bytes) -> None:
    budget = MIB
    body = {"code": NULS.format(byte=byte, n=budget), "collect": ["f"],
            "limits": {"output_bytes": budget, "disk_mb": 16}}
    with server.client(timeout=60) as c:
        r = c.post("/v1/sandbox/run", json=body)
    assert r.status_code == 200, r.text
    # stdout, stderr and the collected files: one budget each, plus the answer's own fields
    assert len(r.content) <= 3 * budget + 64 * 1024, f"a {len(r.content) / MIB:.1f} MiB answer for a 1 MiB budget"


# /v1/sandbox/run_batch held every item's output until the last item finished, then sent it all: one request of
# max_batch_items (4096) tiny programs, each printing its 1 MiB default budget, made the server hold and send 4 GiB
# (measured: 128 items, a 128 MiB answer and +330 MiB of the server's memory; NULs multiply it by six as sent).
# The request's output, counted as sent, is bounded by sandbox_max_request_output_bytes; items past it keep their
# outcome but not their output (output_exceeded, with the reason).
PRINT_MIB = "import os\nos.write(1, b'x' * (1 << 20))\n"


def test_a_batch_cannot_make_the_server_hold_more_than_the_requests_output_budget(tmp_path: Path) -> None:
    env = {"REWARD_SERVICE_SANDBOX_MAX_REQUEST_OUTPUT_BYTES": str(4 * MIB), "REWARD_SERVICE_WORKERS": "1"}
    with run_server(tmp_path, env) as live, live.client(timeout=120) as c:
        r = c.post("/v1/sandbox/run_batch", json={"items": [{"code": PRINT_MIB} for _ in range(12)]})
        assert r.status_code == 200, r.text
        assert len(r.content) <= 5 * MIB, f"a {len(r.content) / MIB:.1f} MiB answer for a 4 MiB request budget"
        results = r.json()["results"]
        whole = [x for x in results if x["status"] == "ok"]
        cut = [x for x in results if x["status"] == "output_exceeded"]
        assert len(whole) == 3 and len(cut) == 9, [x["status"] for x in results]
        assert all(len(x["stdout"]) == MIB for x in whole)
        assert all(x["stdout"] == "" and "output budget" in x["reason"] for x in cut), cut[0]
        # a small batch is untouched, and a single run keeps its own budget
        r = c.post("/v1/sandbox/run_batch", json={"items": [{"code": "print('hi')"} for _ in range(3)]})
        assert [x["stdout"] for x in r.json()["results"]] == ["hi\n"] * 3
