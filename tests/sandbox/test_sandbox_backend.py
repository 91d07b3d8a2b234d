"""The bubblewrap backend as a library: languages, statuses, limits and the warm pool's isolation."""
from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator

import pytest

from sandbox.api import Limits, RunRequest, RunResult, RunStatus
from sandbox.bwrap import BwrapBackend, BwrapConfig
from sandbox.factory import DisabledConfig, UnavailableBackend, build_backend
from sandbox.limits import clamp, over_caps
from tests.support.sandbox import HEAVY_TEMPLATES, LoopedBackend

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


class Runner(LoopedBackend):
    def __init__(self) -> None:
        super().__init__(BwrapConfig(warm_pool=2))

    def run(self, code: str, language: str = "python", **kw: object) -> RunResult:
        limits = Limits(**kw.pop("limits", {}))
        return self.submit(RunRequest(code=code, language=language, limits=limits, **kw))

    def many(self, requests: list[RunRequest]) -> list[RunResult]:
        return self.loop.run_until_complete(self.backend.run_many(requests))


@pytest.fixture(scope="module")
def sb() -> Iterator[Runner]:
    with Runner() as runner:
        yield runner


HELLO = {
    "python": "import sys\nprint('hello', sys.stdin.read().strip(), *sys.argv[1:])",
    "c": '#include <stdio.h>\nint main(int c,char**v){char b[64];scanf("%63s",b);printf("hello %s %s\\n",b,v[1]);}',
    "cpp": '#include <iostream>\nint main(int c,char**v){std::string s;std::cin>>s;'
           'std::cout<<"hello "<<s<<" "<<v[1]<<"\\n";}',
    "javascript": "const s=require('fs').readFileSync(0,'utf8').trim(); console.log('hello', s, process.argv[2]);",
    "java": "import java.util.*;\npublic class Solution { public static void main(String[] a){"
            " Scanner s=new Scanner(System.in);"
            " System.out.println(\"hello \"+s.next()+\" \"+a[0]); } }",
    "go": 'package main\nimport ("fmt";"os")\n'
          'func main(){ var s string; fmt.Scan(&s); fmt.Println("hello", s, os.Args[1]) }',
    "rust": 'use std::io::Read;\nfn main(){ let mut s=String::new(); std::io::stdin().read_to_string(&mut s).unwrap();'
            ' println!("hello {} {}", s.trim(), std::env::args().nth(1).unwrap()); }',
    "bash": 'read x; echo "hello $x $1"',
}
BROKEN = {
    "c": "int main(){ return undefined_name; }",
    "cpp": "int main(){ std::vector<int> v; }",
    "java": "public class Main { public static void main(String[] a){ int x = \"s\"; } }",
    "go": "package main\nfunc main(){ x := 1 }",
    "rust": "fn main(){ let x: i32 = \"s\"; }",
}


@pytest.mark.parametrize("language", sorted(HELLO))
def test_each_available_language_runs_with_stdin_and_args(sb: Runner, language: str) -> None:
    if not sb.backend.languages().get(language):
        pytest.skip(f"{language} toolchain not installed on this host")
    r = sb.run(HELLO[language], language, stdin="world\n", args=["arg1"], limits={"wall_s": 20})
    assert r.status is RunStatus.OK, r
    assert r.stdout.strip() == "hello world arg1"
    assert r.exit_code == 0


def test_a_compile_over_the_requests_compile_budget_is_a_compile_error(sb: Runner) -> None:
    """Limits.compile_s is per request (SandboxFusion's compile_timeout), below the server's compile budget."""
    if not sb.backend.languages().get("cpp"):
        pytest.skip("cpp toolchain not installed on this host")
    r = sb.run(HEAVY_TEMPLATES, "cpp", limits={"compile_s": 1})
    assert r.status is RunStatus.COMPILE_ERROR, r
    assert r.reason == "compilation exceeded its time limit of 1s" and r.wall_ms < 30_000
    capped = clamp(Limits(compile_s=500), sb.backend.config.caps)  # never above the server's budget
    assert capped.compile_s == sb.backend.config.compile_wall_s
    assert sb.run(HELLO["cpp"], "cpp", stdin="x", args=["y"], limits={"compile_s": 30}).stdout.strip() == "hello x y"


@pytest.mark.parametrize("language", sorted(BROKEN))
def test_compile_errors_are_their_own_status(sb: Runner, language: str) -> None:
    if not sb.backend.languages().get(language):
        pytest.skip(f"{language} toolchain not installed on this host")
    r = sb.run(BROKEN[language], language)
    assert r.status is RunStatus.COMPILE_ERROR, r
    assert r.compile_output.strip(), "the compiler's message is returned"
    assert r.stdout == ""


def test_python_behaves_like_a_script(sb: Runner) -> None:
    code = ("import sys, os\nassert __name__ == '__main__'\nprint(__file__, os.getcwd())\n"
            "import numpy\nprint(int(numpy.arange(5).sum()))\nexit(3)")
    r = sb.run(code)
    assert r.status is RunStatus.RUNTIME_ERROR and r.exit_code == 3
    assert r.stdout.split() == ["/work/main.py", "/work", "10"]


def test_uncaught_exception_is_runtime_error_with_traceback(sb: Runner) -> None:
    r = sb.run("def f():\n    raise ValueError('boom')\nf()")
    assert r.status is RunStatus.RUNTIME_ERROR and r.exit_code == 1
    assert "ValueError: boom" in r.stderr


def test_files_and_collect(sb: Runner) -> None:
    r = sb.run("import json\nd=json.load(open('data/in.json'))\nopen('out.txt','w').write(str(d['x']*2))",
               files={"data/in.json": '{"x": 21}'}, collect=["out.txt", "missing.txt"])
    assert r.status is RunStatus.OK, r
    assert r.files == {"out.txt": "42"}


def test_limits_statuses(sb: Runner) -> None:
    assert sb.run("import time; time.sleep(5)", limits={"wall_s": 0.5}).status is RunStatus.TIMEOUT
    cpu = sb.run("while True: pass", limits={"cpu_s": 1, "wall_s": 8})
    assert cpu.status is RunStatus.TIMEOUT and "CPU" in cpu.reason
    mem = sb.run("x = bytearray(800 << 20)", limits={"memory_mb": 200})
    assert mem.status is RunStatus.MEMORY_EXCEEDED
    out = sb.run("while True: print('y' * 1000)", limits={"output_bytes": 50_000})
    assert out.status is RunStatus.OUTPUT_EXCEEDED and out.truncated and len(out.stdout) <= 50_000


def test_runs_do_not_see_each_other(sb: Runner) -> None:
    """Warm sandboxes are single-use: nothing one run leaves behind is visible to the next."""
    writer = ("import os\nopen('/work/leak.txt','w').write('secret')\nopen('/tmp/leak.txt','w').write('secret')\n"
              "os.environ['LEAK']='1'\nimport sys; sys.modules['leak_marker'] = sys")
    reader = ("import os, sys\nprint(os.path.exists('/work/leak.txt'), os.path.exists('/tmp/leak.txt'), "
              "'LEAK' in os.environ, 'leak_marker' in sys.modules, sorted(os.listdir('/work')))")
    results = sb.many([RunRequest(code=writer), RunRequest(code=reader), RunRequest(code=reader)])
    results += [sb.run(reader)]
    for r in results[1:]:
        assert r.stdout.strip() == "False False False False ['main.py']", r


def test_many_runs_in_parallel_are_all_correct(sb: Runner) -> None:
    reqs = [RunRequest(code=f"print({i} * {i})") for i in range(40)]
    results = sb.many(reqs)
    assert [r.stdout.strip() for r in results] == [str(i * i) for i in range(40)]
    assert sb.backend.stats["warm_hits"] > 0


def test_unknown_and_unavailable_backends_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from reward_service.resources.sandbox import backend_config
    from reward_service.settings import load_settings

    backend = build_backend(DisabledConfig())
    assert isinstance(backend, UnavailableBackend)
    r = asyncio.run(backend.run(RunRequest(code="print(1)")))
    assert r.status is RunStatus.SANDBOX_ERROR and "disabled" in r.reason
    missing = build_backend(BwrapConfig(bwrap="/nonexistent/bwrap"))
    assert asyncio.run(missing.run(RunRequest(code="1"))).status is RunStatus.SANDBOX_ERROR
    monkeypatch.setenv("REWARD_SERVICE_SANDBOX_BACKEND", "firecracker")
    with pytest.raises(ValueError, match="firecracker"):
        backend_config(load_settings())


def test_broken_bwrap_is_a_sandbox_error_not_a_program_failure() -> None:
    async def go() -> RunResult:
        backend = BwrapBackend(BwrapConfig(bwrap="false", warm_pool=0))
        try:
            return await backend.run(RunRequest(code="print(1)"))
        finally:
            await backend.close()

    r = asyncio.run(go())
    assert r.status is RunStatus.SANDBOX_ERROR
    assert r.reason


def test_caps() -> None:
    caps = Limits(wall_s=5, memory_mb=512)
    assert over_caps(Limits(wall_s=10, memory_mb=100), caps) == ["wall_s=10 exceeds the server cap of 5"]
    assert over_caps(Limits(wall_s=1, memory_mb=100), caps) == []
    assert any("positive" in p for p in over_caps(Limits(wall_s=0), caps))
    assert clamp(Limits(wall_s=10, memory_mb=100), caps).wall_s == 5


def test_every_sandbox_setting_the_backend_knows_reaches_its_typed_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings block becomes a BwrapConfig (or DockerConfig) field by field, never an untyped mapping on the way:
    a setting the config has but the service forgot to pass would silently keep the config's default."""
    from dataclasses import fields

    from reward_service.resources.sandbox import backend_config
    from reward_service.settings import load_settings
    from sandbox.docker_backend import DockerConfig

    for name, value in {"WARM_POOL": "3", "MAX_CONCURRENT": "5", "REUSE_RUNS": "7", "UID_BASE": "300000",
                        "COMPILE_WALL_S": "42", "MEMORY_CGROUP": "off", "LANGUAGES": '["python"]',
                        "CAPS__WALL_S": "30", "DEFAULTS__WALL_S": "3"}.items():
        monkeypatch.setenv(f"REWARD_SERVICE_SANDBOX_{name}", value)
    settings = load_settings()
    config = backend_config(settings)
    assert isinstance(config, BwrapConfig)
    shared = {f.name for f in fields(BwrapConfig)} & set(type(settings.sandbox).model_fields)
    assert shared >= {"warm_pool", "max_concurrent", "reuse_runs", "uid_base", "compile_wall_s", "memory_cgroup",
                      "languages", "caps", "defaults"}
    for name in shared - {"caps", "defaults"}:
        assert getattr(config, name) == getattr(settings.sandbox, name), name
    assert config.caps.wall_s == 30 and config.caps.compile_s == 42 and config.defaults is not None
    assert config.defaults.wall_s == 3
    monkeypatch.setenv("REWARD_SERVICE_SANDBOX_BACKEND", "docker")
    docker = backend_config(load_settings())
    assert isinstance(docker, DockerConfig) and docker.max_concurrent == 5 and docker.caps.wall_s == 30
