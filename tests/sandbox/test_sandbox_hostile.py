"""Hostile programs through the real server: each must be contained AND leave the server serving."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from tests.support.sandbox import run, still_serving
from tests.support.server import LiveServer, run_server

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

SECRET = "s3cr3t-" + os.urandom(8).hex()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    env = {"SANDBOX_TEST_SECRET": SECRET, "REWARD_SERVICE_SANDBOX_WARM_POOL": "2"}
    with run_server(tmp_path_factory.mktemp("hostile"), env=env) as server:
        yield server


def host_processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def wait_gone(marker: str, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := host_processes_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_fork_bomb(srv: LiveServer) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    r = run(srv, code, limits={"wall_s": 3, "processes": 32})
    assert r["status"] in ("timeout", "runtime_error"), r
    still_serving(srv)


def test_memory_bomb(srv: LiveServer) -> None:
    r = run(srv, "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))", limits={"memory_mb": 256})
    assert r["status"] == "memory_exceeded", r
    assert r["max_rss_kb"] <= 300 * 1024
    still_serving(srv)


def test_infinite_loop(srv: LiveServer) -> None:
    t0 = time.monotonic()
    r = run(srv, "while True:\n    pass", limits={"wall_s": 1.5, "cpu_s": 1})
    assert r["status"] == "timeout", r
    assert time.monotonic() - t0 < 15
    still_serving(srv)


def test_sleep_past_deadline(srv: LiveServer) -> None:
    r = run(srv, "import time\ntime.sleep(60)\nprint('woke')", limits={"wall_s": 1})
    assert r["status"] == "timeout" and "woke" not in r["stdout"], r
    assert 900 <= r["wall_ms"] < 10_000
    still_serving(srv)


def test_child_outliving_parent_and_setsid_are_killed(srv: LiveServer) -> None:
    marker = f"{time.time_ns() % 10**6}.75"
    code = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen(['sleep', '{marker}'])\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{marker}1'])\n"
        "    os._exit(0)\n"
        "print('parent leaves')\n"
    )
    r = run(srv, code)
    assert r["status"] == "ok" and r["stdout"] == "parent leaves\n", r
    assert wait_gone(marker) == [], "a process started in the sandbox survived it"
    still_serving(srv)


def test_kill_everything(srv: LiveServer) -> None:
    # kill(-1) spares the caller and the namespace's pid 1, which is the supervisor: the program can reach its own
    # sandbox's other processes only, and the run still reports the program's own outcome.
    r = run(srv, "import os, signal, subprocess\nsubprocess.Popen(['sleep', '30'])\nos.kill(-1, signal.SIGKILL)\n"
                 "print('still here')")
    assert r["status"] == "ok" and r["stdout"] == "still here\n", r
    r = run(srv, "kill -9 -1; echo still here", language="bash")
    assert r["status"] == "ok" and r["stdout"] == "still here\n", r
    r = run(srv, "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)\nprint('alive')")
    assert r["status"] == "ok" and r["stdout"] == "alive\n", r
    still_serving(srv)


def test_no_network_not_even_the_servers_port(srv: LiveServer) -> None:
    port = urlparse(srv.url).port
    code = (
        "import socket\n"
        f"targets = [('127.0.0.1', {port}), ('::1', {port}), ('8.8.8.8', 53), ('1.1.1.1', 443), ('10.0.0.1', 80)]\n"
        "for host, port in targets:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2).close()\n"
        "        print('CONNECTED', host, port)\n"
        "    except OSError:\n"
        "        print('blocked', host, port)\n"
        "try:\n"
        "    socket.getaddrinfo('pypi.org', 443)\n"
        "    print('RESOLVED')\n"
        "except OSError:\n"
        "    print('no dns')\n"
    )
    r = run(srv, code)
    assert r["status"] == "ok", r
    assert "CONNECTED" not in r["stdout"] and "RESOLVED" not in r["stdout"]
    assert r["stdout"].count("blocked") == 5
    still_serving(srv)


def test_cannot_write_outside_the_work_dir(srv: LiveServer, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    code = (
        "import os\n"
        f"paths = ['/usr/evil', '/etc/evil', '/evil', '/root/evil', '/.sandbox/supervisor.py', {str(victim)!r},"
        f" {str(Path(__file__))!r}, '/proc/sys/kernel/hostname']\n"
        "for p in paths:\n"
        "    try:\n"
        "        with open(p, 'a') as f:\n"
        "            f.write('x')\n"
        "        print('WROTE', p)\n"
        "    except OSError:\n"
        "        print('blocked', p)\n"
        "open('/work/fine.txt', 'w').write('ok')\n"
    )
    r = run(srv, code)
    assert r["status"] == "ok", r
    assert "WROTE" not in r["stdout"] and r["stdout"].count("blocked") == 8
    assert not victim.exists()
    still_serving(srv)


def test_cannot_see_the_servers_environment_files_or_processes(srv: LiveServer) -> None:
    code = (
        "import os, glob\n"
        f"secret = {SECRET[:7]!r} + {SECRET[7:]!r}\n"
        "seen = [k for k, v in os.environ.items() if secret in v]\n"
        "for p in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
        "    try:\n"
        "        if secret.encode() in open(p, 'rb').read():\n"
        "            seen.append(p)\n"
        "    except OSError:\n"
        "        pass\n"
        f"print('LEAK' if seen else 'clean', os.path.exists({str(Path(__file__).parent)!r}),"
        " len([p for p in os.listdir('/proc') if p.isdigit()]) <= 4, sorted(os.environ))\n"
    )
    r = run(srv, code)
    assert r["status"] == "ok", r
    assert SECRET not in r["stdout"] and SECRET not in r["stderr"]
    assert r["stdout"].startswith("clean False True"), r["stdout"]
    still_serving(srv)


def test_cannot_read_other_runs_files(srv: LiveServer) -> None:
    writer = ("import time\nfor p in ['/work/other.txt', '/tmp/other.txt']:\n    open(p, 'w').write('PRIVATE')\n"
              "print('written')\ntime.sleep(2)")
    reader = (
        "import os, time\ntime.sleep(0.7)\nhits = []\n"
        "for top in ['/work', '/tmp', '/']:\n"
        "    for root, dirs, files in os.walk(top):\n"
        "        dirs[:] = [d for d in dirs if root + d not in ('/usr', '/proc', '/sys', '/root', '/lib', '/etc')]\n"
        "        hits += [os.path.join(root, f) for f in files if f == 'other.txt']\n"
        "print(hits)"
    )
    with srv.client(timeout=120) as c:
        res = c.post("/v1/sandbox/run_batch", json={"items": [{"code": writer}, {"code": reader}]}).json()["results"]
    assert res[0]["stdout"] == "written\n", res
    assert res[1]["status"] == "ok" and res[1]["stdout"] == "[]\n", res
    after = run(srv, "import os\nprint(os.listdir('/work'), os.listdir('/tmp'))")
    assert after["stdout"] == "['main.py'] []\n", after
    still_serving(srv)


def test_stdout_flood(srv: LiveServer) -> None:
    r = run(srv, "import sys\nwhile True:\n    sys.stdout.write('A' * 65536)", limits={"output_bytes": 200_000})
    assert r["status"] == "output_exceeded" and r["truncated"] is True, {k: r[k] for k in ("status", "reason")}
    assert 0 < len(r["stdout"]) <= 200_000
    still_serving(srv)


def test_filling_the_work_dir_disk(srv: LiveServer) -> None:
    code = (
        "import errno\ntotal = 0\ni = 0\n"
        "try:\n"
        "    while True:\n"
        "        with open(f'/work/f{i}', 'wb') as f:\n"
        "            f.write(b'x' * (8 << 20))\n"
        "        total += 8\n        i += 1\n"
        "except OSError as e:\n"
        "    print('stopped', errno.errorcode[e.errno], total)\n"
    )
    r = run(srv, code, limits={"disk_mb": 64, "file_size_mb": 64})
    assert r["status"] == "ok", r
    words = r["stdout"].split()
    assert words[:2] == ["stopped", "ENOSPC"] and int(words[2]) <= 1024, r
    r = run(srv, "open('/work/one','wb').write(b'x' * (100 << 20))", limits={"file_size_mb": 10})
    assert r["status"] == "runtime_error", r  # SIGXFSZ / EFBIG, never a full disk
    still_serving(srv)


def test_language_specific_bombs(srv: LiveServer) -> None:
    with srv.client() as c:
        langs = c.get("/v1/sandbox/languages").json()
    if langs.get("c", {}).get("available"):
        r = run(srv, "#include <unistd.h>\nint main(){ while(1) fork(); }", language="c", limits={"wall_s": 2})
        assert r["status"] in ("timeout", "runtime_error"), r
        r = run(srv, "#include <stdlib.h>\n#include <string.h>\nint main(){ for(;;){ char*p=malloc(1<<24);"
                     " if(!p) return 3; memset(p,1,1<<24);} }", language="c", limits={"memory_mb": 128})
        assert r["status"] in ("memory_exceeded", "runtime_error") and r["max_rss_kb"] <= 160 * 1024, r
    if langs.get("bash", {}).get("available"):
        r = run(srv, ":(){ :|:& };:", language="bash", limits={"wall_s": 2, "processes": 32})
        assert r["status"] in ("timeout", "runtime_error", "ok"), r
    still_serving(srv)


def test_server_survived_everything(srv: LiveServer) -> None:
    with srv.client() as c:
        assert c.get("/readyz").status_code == 200
        batch = c.post("/v1/sandbox/run_batch", json={"items": [{"code": f"print({i})"} for i in range(20)]})
    assert [x["stdout"] for x in batch.json()["results"]] == [f"{i}\n" for i in range(20)]
    assert "Traceback" not in srv.log().split("sandbox failure")[0] or "sandbox failure" not in srv.log()
    with httpx.Client() as plain:
        assert plain.get(f"{srv.url}/healthz").status_code == 200
