"""A persistent Python interpreter for one session, run INSIDE a sandbox as the program of a session job.

Stdlib only and standalone (sandbox/inside/README.md): the run manager forks it from its warm interpreter (no
interpreter start-up) with the session's limits, seccomp filter and work dir, and, for a session job only, the host's
job pipe as fd 0 and the result pipe as fd 3. Cells come on fd 0 (a 4-byte little-endian length, then JSON:
``{"code", "timeout_s", "output_bytes"}``); each answer leaves on fd 3 as one frame (``S``, a 4-byte length, JSON),
the first one (``{"ready": true}``) once the interpreter is set up. Everything a cell runs shares one namespace (a
module named ``__main__``), as a notebook's cells do: the cell's statements are executed, a trailing expression is
evaluated and its value's repr returned.

Output: fds 1 and 2 are pipes this process drains in a thread (so a child process that writes a lot never blocks),
keeping at most ``output_bytes`` of each per cell. A cell past its time limit gets KeyboardInterrupt (SIGALRM), as a
notebook's interrupt, and every other process of the session is killed; the interpreter goes on if the cell lets it.
Unlike a notebook, no process outlives its step (``_end_strays``): variables, imports, threads and files last.
A cell that swallows the interrupt, or is stuck in C code, is the host's to end: it kills the sandbox after a grace.
A process the cell forks never returns to this loop: it exits where the cell's code ends.

Everything here runs beside the policy's code in one process: the host trusts nothing it reads from fd 3 beyond the
frame's size limit and the session's own fate.
"""
import ast
import json
import os
import select
import signal
import sys
import threading
import time
import traceback

TYPE_CHECKING = False  # only mypy reads the block below: typing would cost start-up
if TYPE_CHECKING:
    from typing import Any

CELL_FD = 0
ANSWER_FD = 3
HERE = "/.sandbox/repl.py"  # the name the host compiles this program under (its frames leave tracebacks)
VALUE_CHARS = 8192  # a trailing expression's repr, at most
TRACEBACK_CHARS = 16384
PID = os.getpid()


class _Streams:
    """fds 1 and 2 as pipes, drained by a thread into capped buffers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cap = 65536
        self.data = [bytearray(), bytearray()]
        self.over = [False, False]
        self.reads: list[int] = []
        for target in (1, 2):
            r, w = os.pipe()
            os.dup2(w, target)
            os.close(w)
            os.set_blocking(r, False)
            self.reads.append(r)
        # line-buffered, so a cell's prints and its children's output keep their order
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        self.out, self.err = sys.stdout, sys.stderr
        threading.Thread(target=self._drain_forever, daemon=True, name="session-output").start()

    def _read(self, index: int) -> None:
        """What the pipe holds now (called with the lock held): kept up to the cap, the rest dropped."""
        fd = self.reads[index]
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                return
            room = self.cap - len(self.data[index])
            if len(chunk) > room:
                self.over[index] = True
            self.data[index] += chunk[:max(0, room)]

    def _drain_forever(self) -> None:
        while True:
            try:
                ready = select.select(self.reads, [], [])[0]
            except (OSError, ValueError):
                return
            with self.lock:
                for fd in ready:
                    self._read(self.reads.index(fd))

    def take(self) -> tuple[str, str, bool]:
        """This cell's stdout and stderr (each cut at the cap), and whether either was cut."""
        for stream in (self.out, self.err):
            try:
                stream.flush()
            except Exception:
                pass
        with self.lock:
            self._read(0)
            self._read(1)
            out, err, over = bytes(self.data[0]), bytes(self.data[1]), any(self.over)
            self.data = [bytearray(), bytearray()]
            self.over = [False, False]
        return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), over


def _send(answer: "dict[str, Any]") -> None:
    data = json.dumps(answer, ensure_ascii=False, default=str).encode("utf-8", "replace")
    view = memoryview(b"S" + len(data).to_bytes(4, "little") + data)
    while view:
        view = view[os.write(ANSWER_FD, view):]


def _read_exact(size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            got = os.read(CELL_FD, size - len(chunks))
        except InterruptedError:
            continue
        if not got:
            return None
        chunks += got
    return bytes(chunks)


def _next_cell() -> "dict[str, Any] | None":
    head = _read_exact(4)
    body = _read_exact(int.from_bytes(head, "little")) if head is not None else None
    if body is None:
        return None
    cell: dict[str, Any] = json.loads(body)
    return cell


class _Clock:
    """The cell's time limit: SIGALRM raises KeyboardInterrupt while a cell runs (never in this loop's own code),
    after killing every other process of the session (a fork bomb, a child holding the output pipes)."""

    def __init__(self) -> None:
        self.in_cell = False
        self.fired = False
        signal.signal(signal.SIGALRM, self._alarm)

    def _alarm(self, signum: int, frame: object) -> None:
        if not self.in_cell or os.getpid() != PID:
            return
        self.fired = True
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal but ourselves and the session's init
        except OSError:
            pass
        _reap(0.2)
        raise KeyboardInterrupt("the step exceeded its time limit")

    def arm(self, seconds: float) -> None:
        self.fired = False
        self.in_cell = True
        signal.signal(signal.SIGALRM, self._alarm)  # the cell may have replaced it
        signal.setitimer(signal.ITIMER_REAL, max(0.001, seconds))

    def disarm(self) -> None:
        self.in_cell = False
        signal.setitimer(signal.ITIMER_REAL, 0)


def _end_strays() -> None:
    """No process outlives the step that started it (threads do: they are the interpreter's): whatever a cell left
    running, a fork bomb's remains or a server it started, is killed, so a session's CPU is its interpreter's alone
    and every step starts with the whole process limit."""
    try:
        os.kill(-1, signal.SIGKILL)  # every process we may signal but ourselves and the session's init
    except OSError:
        pass
    _reap()


def _reap(within_s: float = 1.0) -> None:
    """Collect the children a kill is taking (each counts against the session's process limit until collected): a
    SIGKILL lands when its process next runs, so this waits for them, a bounded while."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.002)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _exception(exc: BaseException, name: str) -> "dict[str, str]":
    try:
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        # the frames of this file are the session's machinery, not the cell's
        text = "".join(line for line in lines if HERE not in line and "<frozen " not in line)
        message = str(exc)
    except Exception as failed:
        text, message = f"{type(exc).__name__} (cannot be shown: {type(failed).__name__})", ""
    if len(text) > TRACEBACK_CHARS:
        text = text[:TRACEBACK_CHARS // 2] + "\n...\n" + text[-TRACEBACK_CHARS // 2:]
    return {"type": type(exc).__name__, "message": message[:VALUE_CHARS], "traceback": text, "cell": name}


def _run(code: str, index: int, namespace: "dict[str, Any]", clock: _Clock, timeout_s: float) -> "dict[str, Any]":
    import linecache

    name = f"<cell-{index}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    answer: dict[str, Any] = {"status": "ok", "value": None, "exception": None}
    try:
        clock.arm(timeout_s)
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            tail = tree.body[-1] if tree.body else None
            if isinstance(tail, ast.Expr):
                tree.body.pop()
                last = ast.Expression(tail.value)
            exec(compile(tree, name, "exec"), namespace)  # noqa: S102 - the session exists to run this code
            if last is not None:
                value = eval(compile(last, name, "eval"), namespace)  # noqa: S307
                if value is not None:
                    namespace["_"] = value
                    text = repr(value)
                    answer["value"] = text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "..."
        finally:
            clock.disarm()
            if os.getpid() != PID:  # a process the cell forked ends where the cell's code does
                os._exit(0)
    except SystemExit as exc:  # exit() in a cell ends the cell, not the interpreter, as in a notebook
        answer.update(status="error", exception=_exception(exc, name))
    except BaseException as exc:
        if os.getpid() != PID:
            os._exit(1)
        timed_out = clock.fired and isinstance(exc, KeyboardInterrupt)
        answer.update(status="timeout" if timed_out else "error", exception=_exception(exc, name))
    return answer


def main() -> None:
    streams = _Streams()
    clock = _Clock()
    user = type(sys)("__main__")
    user.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = user
    namespace = user.__dict__
    _send({"ready": True, "pid": PID})
    index = 0
    while True:
        cell = _next_cell()
        if cell is None or cell.get("close"):
            return
        index += 1
        streams.cap = int(cell.get("output_bytes", 65536))
        sys.stdout, sys.stderr = streams.out, streams.err  # a cell that replaced them got them for itself only
        started = time.monotonic()
        answer = _run(str(cell.get("code", "")), index, namespace, clock, float(cell.get("timeout_s", 10.0)))
        _end_strays()
        answer["stdout"], answer["stderr"], answer["truncated"] = streams.take()
        answer["wall_ms"] = round((time.monotonic() - started) * 1000.0, 3)
        _send(answer)


main()
