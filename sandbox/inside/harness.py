"""The Python test harness that runs INSIDE the sandbox (stdlib only; sent as the sandbox program's source).

Why two processes: a candidate that shares an interpreter with the tests can always win (patch builtins, walk up
frames, jump with a trace function, return an object whose ``__eq__`` is always true, exit 0 early). So the tests
never share one with it:

- the *judge* (this file run as ``__main__``) loads the modules the reference imports (argv, computed on the host),
  keeps that module table as the only one it will ever hand to the tests, reads the job from stdin (tests, a per-run
  nonce) before any candidate code exists, makes itself non-dumpable (no ptrace, no ``/proc/<pid>/mem`` or ``fd``
  for same-uid processes), and executes the test code itself;
- the *candidate* runs in a child that never saw the tests or the nonce: the first one is forked before the judge
  loads the reference's modules (their import-time state, such as numpy's global generator, is the tests') and
  reads its stdin (the sandbox hands stdin over without it ever passing through the interpreter's memory, see
  sandbox/inside/supervisor.py, so the fork copies nothing secret and skips interpreter start-up); a restart after a
  timeout or crash is started with ``exec`` (a fresh memory image). Its stdin/stdout/stderr are /dev/null, and it
  only answers requests over a pipe: "call f with these arguments", "get this attribute";
- the judge writes one line per finished test, prefixed by the nonce, on a private dup of the real stdout. The host
  counts only nonce lines and treats every test without one as not passed.

The trust boundary is the pipe. The candidate controls its whole process, this module's copy in it included, so
every message from it is data the judge checks, never an instruction it follows:

- values (the program's names, call results, ``len``/``bool``/``str``/``iter`` answers) enter only through
  ``Candidate.decode``: plain builtins, opaque handles (``RemoteRef``) and, of Python's builtins, only data types,
  exception classes and functions that compute on their arguments (``PURE_BUILTINS``); anything else breaks the
  protocol. No candidate object ever runs code in the judge, and equality is Python's own on data;
- exceptions cross by name as a builtin ``Exception`` subclass, else ``CandidateError``; ``StopIteration`` only
  as the end of an iterator;
- names (``admit_names``) are identifiers, never dunders (``__builtins__``, ``__eq__check``), never a builtin's or
  standard module's name unless the tests take it from the program; a module-valued name is looked up in the
  table kept before any candidate existed and never imported, so the candidate cannot make the judge run code;
- after a restart the test namespace keeps what the judge and the test code bound: the set of program names is
  fixed by the first load, and only a name still bound to the handle it got then takes the new process's handle.

Killing the judge, exiting early, hanging or crashing therefore only ever removes results; it cannot add any.

A test's budget is CPU time (``Budget``: the judge's, the candidate's threads and children, what it left behind),
so load does not change a verdict; a wall-clock backstop, which names itself, ends a candidate that waits instead.
"""
import builtins
import marshal
import math
import os
import select
import sys
import time

TYPE_CHECKING = False  # only mypy reads the block below: typing, collections.abc and subprocess would cost start-up
if TYPE_CHECKING:
    import signal
    import subprocess
    from collections.abc import Callable, Collection
    from types import ModuleType
    from typing import IO, Any, NoReturn  # Any: the program's and the tests' values, told apart by type(v) is T
else:
    import _signal as signal  # the C module: ``signal`` adds enum, which costs more than the judge's other imports

MAX_MESSAGE = 16 << 20
# the bytecode this interpreter runs (the job's bytecode must carry it; importlib.util would cost an import)
BYTECODE_MAGIC = getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", b"").hex() or None
MAX_DEPTH = 200
MESSAGE_CHARS = 300
# The builtins a value from the candidate may name ({"$bi": name}), besides exception classes: data types and
# functions that only compute on their arguments. The rest (exec, eval, compile, open, __import__, getattr,
# setattr, vars, globals, print, input, breakpoint, type...) run code or reach state wherever they are called, so
# the candidate's process sends them as handles, and the judge refuses them by name.
PURE_BUILTINS = frozenset((
    "bool", "int", "float", "complex", "str", "bytes", "bytearray", "tuple", "list", "dict", "set", "frozenset",
    "range", "slice", "enumerate", "zip", "map", "filter", "reversed",
    "abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format", "hash", "hex", "id", "isinstance",
    "issubclass", "iter", "len", "max", "min", "next", "oct", "ord", "pow", "repr", "round", "sorted", "sum",
))


def _json_codec() -> "tuple[Callable[[object], str], Callable[[str | bytes | bytearray], Any]]":
    """(dumps, loads) on the C accelerator ``_json`` alone: ``import json`` pulls in ``re`` and ``enum``, which cost
    more than everything else the judge imports, in every run. Same parser and output as ``json`` (compact form)."""
    try:
        import _json
    except ImportError:  # an interpreter without the accelerator
        import json

        return (lambda obj: json.dumps(obj, separators=(",", ":"))), json.loads

    class _Context:  # the attributes _json's scanner reads from a json.JSONDecoder
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = staticmethod({"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.__getitem__)

    def refuse(obj: object) -> "NoReturn":
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")

    encode = _json.make_encoder({}, refuse, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
    # typeshed types the context as a make_scanner; _json reads only the attributes _Context has
    scan = _json.make_scanner(_Context())  # type: ignore[arg-type]

    def dumps(obj: object) -> str:
        return "".join(encode(obj, 0))

    def loads(text: str | bytes | bytearray) -> "Any":
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8")
        try:
            value, end = scan(text, 0)
        except Exception:  # StopIteration, JSONDecodeError, RecursionError: all mean malformed
            raise ValueError("malformed JSON") from None
        if end != len(text):
            raise ValueError("trailing data after JSON")
        return value

    return dumps, loads


json_dumps, json_loads = _json_codec()

# ----------------------------------------------------------------------------------------------- wire format
# JSON with tags, so tuples, sets, dict keys of any plain type, bytes, complex and non-finite floats survive, and
# anything else travels as a handle ({"$r": id}) that only the candidate process can resolve.


def pure_builtin(name: str) -> bool:
    """May a value from the candidate be this builtin (see PURE_BUILTINS)?"""
    if name in PURE_BUILTINS:
        return True
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, Exception)


def to_wire(value: "Any", keep: "Callable[[object], int] | None" = None, depth: int = 0) -> object:
    """Encode a plain value; ``keep`` (candidate side only) turns anything else into a handle id."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value if -(1 << 53) < value < (1 << 53) else {"$x": hex(value)}
    if t is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if t is list:
        return [to_wire(v, keep, depth + 1) for v in value]
    if t is tuple:
        return {"$t": [to_wire(v, keep, depth + 1) for v in value]}
    if t is dict:
        return {"$d": [[to_wire(k, keep, depth + 1), to_wire(v, keep, depth + 1)] for k, v in value.items()]}
    if t is set or t is frozenset:
        return {"$s" if t is set else "$fs": [to_wire(v, keep, depth + 1) for v in value]}
    if t is bytes:
        import binascii  # here: rare, and every module the judge loads up front is paid in every run

        return {"$b": binascii.b2a_base64(value, newline=False).decode()}
    if t is complex:
        return {"$c": [to_wire(value.real), to_wire(value.imag)]}
    if isinstance(value, RemoteRef):
        if value._generation != value._conn.generation:  # its id now names another object of the new process
            raise value._conn.gone("object from a candidate process that has since been restarted")
        return {"$r": value._rid}
    name = getattr(value, "__name__", None)
    if type(name) is str and getattr(builtins, name, None) is value and (keep is None or pure_builtin(name)):
        return {"$bi": name}  # int, len, ...: the receiver's own builtin
    if keep is None:
        raise TypeError(f"cannot pass a {t.__name__} to the candidate")
    plain = _plainify(value)
    if plain is not _NOT_PLAIN:
        return to_wire(plain, keep, depth + 1)
    return {"$r": keep(value)}


_NOT_PLAIN = object()
_PLAIN_BASES: tuple[type, ...] = (bool, int, float, complex, str, bytes, tuple, list, dict, frozenset, set)


def _plainify(value: object) -> object:
    """Candidate side: subclasses of plain types and numpy values become the plain value a test expects."""
    for base in _PLAIN_BASES:
        if isinstance(value, base):
            return base(value)
    if type(value).__module__.split(".")[0] == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    return _NOT_PLAIN


def from_wire(data: "Any", resolve: "Callable[[int], object]", depth: int = 0,
              admit: "Callable[[str], bool] | None" = None) -> "Any":
    """Decode into plain builtins; handles become whatever ``resolve`` makes of them, and a builtin by name is
    decoded only where ``admit`` (the judge's rule for the candidate's values) allows it."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(data)
    if data is None or t in (bool, int, float, str):
        return data
    if t is list:
        return [from_wire(v, resolve, depth + 1, admit) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError("malformed value")
    (tag, body), = data.items()
    if tag == "$x":
        return int(body, 16)
    if tag == "$f":
        return float(body)
    if tag == "$t":
        return tuple(from_wire(v, resolve, depth + 1, admit) for v in body)
    if tag == "$d":
        return {from_wire(k, resolve, depth + 1, admit): from_wire(v, resolve, depth + 1, admit) for k, v in body}
    if tag == "$s":
        return {from_wire(v, resolve, depth + 1, admit) for v in body}
    if tag == "$fs":
        return frozenset(from_wire(v, resolve, depth + 1, admit) for v in body)
    if tag == "$b":
        import binascii

        return binascii.a2b_base64(body)
    if tag == "$c":  # a non-finite part comes tagged, as any float does
        real, imag = (from_wire(part, resolve, depth + 1, admit) for part in body)
        if type(real) is not float or type(imag) is not float:
            raise ValueError("malformed complex")
        return complex(real, imag)
    if tag == "$r":
        return resolve(int(body))
    if tag == "$bi":
        value = getattr(builtins, body, None) if type(body) is str and (admit is None or admit(body)) else None
        if isinstance(value, type) or type(value) is type(len):
            return value
        raise ValueError(f"builtin {str(body)[:40]!r} refused")
    raise ValueError(f"unknown tag {tag!r}")


def send(fd: int, obj: object) -> None:
    data = json_dumps(obj).encode()
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int, budget: "Budget | None") -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if budget is not None:
            while not select.select([fd], [], [], budget.wait())[0]:
                pass  # budget.wait raises CandidateTimeout once the CPU budget or the wall backstop is spent
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise CandidateGone("the candidate process exited")
        buf += chunk
    return bytes(buf)


def receive(fd: int, budget: "Budget | None" = None) -> "Any":
    size = int.from_bytes(_read_exact(fd, 4, budget), "big")
    if size > MAX_MESSAGE:
        raise CandidateGone("the candidate sent an oversized message")
    return json_loads(_read_exact(fd, size, budget))


# ------------------------------------------------------------------------------------------ candidate side


def serve_candidate(rfd: int, wfd: int) -> None:
    """Child main loop: run the program, then answer requests until the pipe closes."""
    objects: dict[int, Any] = {}

    def keep(obj: object) -> int:
        objects[len(objects) + 1] = obj
        return len(objects)

    def resolve(rid: int) -> "Any":
        return objects[rid]

    init = receive(rfd)
    sys.path[:] = init["path"]
    namespace: dict[str, object] = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        exec(compile(init["program"], "<solution>", "exec"), namespace)  # noqa: S102 - the candidate's program
        names: dict[str, object] = {}
        for name in sorted(namespace):  # sorted: a restarted child hands out the same ids to the same names
            value = namespace[name]
            if name.startswith("__"):
                continue
            if type(value) is type(sys):  # the judge imports the same module itself (never from the work dir)
                names[name] = {"$m": str(getattr(value, "__name__", ""))}
            else:
                names[name] = to_wire(value, keep)
        reply: dict[str, object] = {"names": names}
    except BaseException as exc:
        reply = {"exc": _describe(exc)}
    send(wfd, reply)
    while True:
        try:
            req = receive(rfd)
        except CandidateGone:
            return
        try:
            target = objects[req["id"]]
            op = req["op"]
            if op == "call":
                args = from_wire(req["args"], resolve)
                kwargs = from_wire(req["kwargs"], resolve)
                result = target(*args, **kwargs)
            elif op == "getattr":
                result = getattr(target, req["name"])
            elif op == "setattr":
                setattr(target, req["name"], from_wire(req["value"], resolve))
                result = None
            elif op == "getitem":
                result = target[from_wire(req["key"], resolve)]
            elif op == "setitem":
                target[from_wire(req["key"], resolve)] = from_wire(req["value"], resolve)
                result = None
            elif op == "iter":
                result = iter(target)
            elif op == "next":
                result = next(target)
            elif op == "len":
                result = len(target)
            elif op == "str":
                result = str(target)
            elif op == "bool":
                result = bool(target)
            else:
                raise ValueError(f"unknown op {op!r}")
            reply = {"ok": to_wire(result, keep)}
        except BaseException as exc:
            reply = {"exc": _describe(exc)}
        send(wfd, reply)


def _describe(exc: BaseException) -> list[str]:
    return [type(exc).__name__, str(exc)[:MESSAGE_CHARS]]


# -------------------------------------------------------------------------------------------------- judge side


class CandidateTimeout(BaseException):
    """The candidate overran the test's time budget (BaseException: test code must not swallow it)."""


class CandidateGone(BaseException):
    """The candidate process died or broke the protocol."""


class StopTests(BaseException):
    """stop_on_first_failure: leave the test code at the first failed test."""


class CandidateError(Exception):
    """A candidate exception without a builtin counterpart."""


# ------------------------------------------------------------------------------------------------ a test's time

CPUS = len(os.sched_getaffinity(0))  # the CPU time a test can use per second of wall time, at most
CHECK_MIN_S = 0.05  # the shortest wait between two looks at a test's CPU time


def process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` so far, every thread of it, from its CPU clock (one syscall, no /proc read;
    the kernel lets any process read another's); 0 once it is gone."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    except OSError:
        return 0.0


def _left_out(candidate: int) -> "dict[int, int]":
    """What the candidate's own clock leaves out, from /proc: each process's CPU in clock ticks, its own (utime,
    stime) and what it reaped (cutime, cstime), keyed by pid: the candidate's children and their descendants, and
    the processes the run's init adopted when their parent died (where a child the candidate forked and left behind
    goes) with the init's reaped ones under its own pid. The candidate counts only for what it reaped, the init only
    when it is the judge's parent (the sandbox's run manager, or the container's first process); never the judge or
    its ancestors."""
    stats: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            except OSError:  # gone meanwhile
                continue
            try:
                data = os.read(fd, 1024)
            except OSError:
                continue
            finally:
                os.close(fd)
            fields = data.rsplit(b")", 1)[-1].split()  # after the command's name, which may hold anything
            if len(fields) > 14:
                stats[int(name)] = fields
    children: dict[int, list[int]] = {}
    for pid, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(pid)
    me = os.getpid()
    found: dict[int, int] = {}
    roots = [candidate]
    if os.getppid() == 1 and 1 in stats:
        roots += [pid for pid in children.get(1, ()) if pid != me]
        found[1] = int(stats[1][13]) + int(stats[1][14])
    while roots:
        pid = roots.pop()
        got = stats.get(pid)
        if got is None or pid in found or pid == me:
            continue
        own = 0 if pid == candidate else int(got[11]) + int(got[12])
        found[pid] = own + int(got[13]) + int(got[14])
        roots += children.get(pid, ())
    return found


def others_cpu(candidate: int) -> float:
    """CPU seconds of what the candidate's own clock leaves out (``_left_out``). Read from /proc: only when a test
    ran long enough that its CPU budget might be spent, and once per restart."""
    return sum(_left_out(candidate).values()) / os.sysconf("SC_CLK_TCK")


def kill_left_behind() -> None:
    """After the candidate was killed: every process it left behind (its children, adopted by the run's init), so
    nothing of a candidate that timed out or crashed computes on into the next tests' time."""
    for pid in _left_out(0):
        if pid != 1:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class Budget:
    """The time of one test (or of loading the program, or of check's own statements between tests): CPU seconds of
    the judge and the candidate (its threads, its children, what it left behind) since it began, so a program gets
    the same verdict on a busy machine as on a quiet one; and a wall-clock backstop, a multiple of that budget, for
    a program that waits instead of computing (it sleeps or blocks, or a machine loaded past reason starves it).
    Nothing is measured before the earliest moment the budget could be spent (every CPU busy with the test since it
    began): a test that ends before that costs two clock reads."""

    __slots__ = ("cpu_s", "wall_s", "candidate", "wall_end", "next_check", "judge0", "pid", "own0", "others0")

    def __init__(self, cpu_s: float, wall_s: float, candidate: "Candidate") -> None:
        now = time.monotonic()
        self.cpu_s, self.wall_s, self.candidate = cpu_s, wall_s, candidate
        self.wall_end = now + wall_s
        self.next_check = now + cpu_s / CPUS
        self.judge0 = time.process_time()
        self.pid = candidate.pid
        self.own0 = process_cpu(self.pid) if self.pid else 0.0
        self.others0 = candidate.others_base

    def used(self) -> float:
        """CPU seconds spent since the budget began. A candidate started since (a restart) counts from its start."""
        pid = self.candidate.pid
        same = pid == self.pid
        own = (process_cpu(pid) - (self.own0 if same else 0.0)) if pid else 0.0
        others = others_cpu(pid) - (self.others0 if same else self.candidate.others_base) if pid else 0.0
        return time.process_time() - self.judge0 + own + max(0.0, others)

    def wait(self) -> float:
        """Seconds to wait for the candidate before looking again; raises CandidateTimeout, naming the limit, once
        the CPU budget or the wall backstop is spent."""
        now = time.monotonic()
        if now >= self.wall_end:
            raise CandidateTimeout(
                f"wall-clock backstop of {self.wall_s:g}s reached with {self.used():.2f}s of the {self.cpu_s:g}s CPU "
                "budget used: the program waited or slept (or the machine starved it)")
        if now >= self.next_check:
            used = self.used()
            if used >= self.cpu_s:
                raise CandidateTimeout(f"CPU time limit of {self.cpu_s:g}s reached")
            self.next_check = now + max(CHECK_MIN_S, (self.cpu_s - used) / CPUS)
        return max(0.0, min(self.wall_end, self.next_check) - now)


def _exception_from(name: str, message: str, op: str) -> Exception:
    """The judge's own exception for one the candidate named: a builtin ``Exception`` subclass, else CandidateError.
    StopIteration only ends an iterator (``next``): raised from a call it would end a test's loop over ``map``."""
    message = message[:MESSAGE_CHARS]
    if name == "StopIteration" and op == "next":
        return StopIteration()
    cls = getattr(builtins, name, None)
    if (isinstance(cls, type) and issubclass(cls, Exception)
            and not issubclass(cls, (StopIteration, StopAsyncIteration))):
        try:
            return cls(message)
        except Exception:  # a class whose constructor wants more than a message (ExceptionGroup, UnicodeError...)
            pass
    return CandidateError(f"{name[:60]}: {message}")


class RemoteRef:
    """Stands in the judge for a candidate object that is not plain data: every use is a request to the child."""

    __slots__ = ("_rid", "_conn", "_generation", "_label")
    _rid: int
    _conn: "Candidate"
    _generation: int
    _label: str

    def __init__(self, conn: "Candidate", rid: int, label: str) -> None:
        object.__setattr__(self, "_rid", rid)
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_generation", conn.generation)
        object.__setattr__(self, "_label", label)

    def _ask(self, op: str, **fields: object) -> "Any":
        return self._conn.request(self, op, fields)

    def __call__(self, *args: object, **kwargs: object) -> "Any":
        return self._ask("call", args=to_wire(list(args)), kwargs=to_wire(kwargs))

    def __getattr__(self, name: str) -> "Any":
        if name.startswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: object) -> None:
        self._ask("setattr", name=name, value=to_wire(value))

    def __getitem__(self, key: object) -> "Any":
        return self._ask("getitem", key=to_wire(key))

    def __setitem__(self, key: object, value: object) -> None:
        self._ask("setitem", key=to_wire(key), value=to_wire(value))

    def __iter__(self) -> "Any":
        return self._ask("iter")

    def __next__(self) -> "Any":
        return self._ask("next")

    def __len__(self) -> "Any":
        return self._ask("len")

    def __str__(self) -> "Any":
        return self._ask("str")

    def __bool__(self) -> "Any":
        return self._ask("bool")

    def __eq__(self, other: object) -> bool:
        # only the same handle equals itself: candidate objects never compare equal to data
        return other is self

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<candidate object {self._label}>"

    def _follow(self, new: "RemoteRef") -> None:
        """Stand for ``new``'s object from now on (the judge's own decision after a restart, ``Judge.rebind``)."""
        object.__setattr__(self, "_rid", new._rid)
        object.__setattr__(self, "_generation", new._generation)


class _Child:
    """A forked candidate process, with the two methods of ``subprocess.Popen`` the judge uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> None:
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def fork_candidate() -> tuple[_Child, int, int]:
    """Called before the job is read: a child that will run the program. Its memory is a copy of this process's,
    which holds no test and no nonce yet, and forking skips the interpreter start-up an ``exec`` costs."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        exit_now = os._exit  # bound here: the program may replace os._exit, and the child must never leave
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # stdin (still holding the unread job) and the host's pipes leave the child
                os.dup2(devnull, fd)
            low = 3
            for fd in sorted((req_r, rep_w)):
                os.closerange(low, fd)
                low = fd + 1
            os.closerange(low, 1 << 16)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            serve_candidate(req_r, rep_w)
        finally:
            exit_now(0)
    os.close(req_r)
    os.close(rep_w)
    return _Child(pid), rep_r, req_w


class Candidate:
    """The child process running the program, restarted after a crash or a timeout."""

    def __init__(self, program: str, path: list[str], on_trouble: "Callable[[BaseException], None]",
                 spare: tuple[_Child, int, int] | None = None) -> None:
        self.program = program
        self.path = path
        self.on_trouble = on_trouble  # told about every timeout or crash, even one test code swallows
        self.spare = spare  # (process, reply fd, request fd) forked before the job was read, used first
        self.generation = 0
        self.proc: _Child | subprocess.Popen[bytes] | None = None
        self.budget: Budget | None = None  # what the running test (or load) may still spend
        # others_cpu when the running candidate started: 0 for the first, forked before anything else of the run ran
        self.others_base = 0.0

    @property
    def alive(self) -> bool:
        return self.proc is not None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self, cpu_s: float, wall_s: float) -> dict[str, object]:
        """Start the child and run the program within its own budget; returns the names it defined, still on the
        wire (``admit_names`` decides which the tests see)."""
        self.stop()
        self.generation += 1
        pipe = None
        if self.spare is not None:
            (self.proc, self.rfd, self.wfd), self.spare = self.spare, None
        else:
            kill_left_behind()
            pipe = self._exec_child()
            self.others_base = others_cpu(self.pid)  # where the count of what it leaves out starts
        self.budget = Budget(cpu_s, wall_s, self)
        try:
            if pipe is not None:
                pipe.write(_HARNESS_SOURCE.encode())
                pipe.close()
            send(self.wfd, {"program": self.program, "path": self.path})
            reply = self._receive()
        except BrokenPipeError:
            self.stop()
            raise CandidateGone("the candidate process exited before running the program") from None
        except BaseException:
            self.stop()
            raise
        if "exc" in reply:
            name, message = self._exception_fields(reply["exc"])
            self.stop()
            raise CandidateGone(f"the program raised {name[:60]}: {message[:MESSAGE_CHARS]}")
        names = reply.get("names")
        if type(names) is not dict:
            raise self._broken("no names in the reply to loading the program")
        return names

    def _exec_child(self) -> "IO[bytes] | None":
        """A restart, after the job was read: a fresh interpreter (``exec``: nothing of this memory survives);
        returns its stdin, where the harness source still has to go."""
        import subprocess  # only here: a restart is rare, and the import costs as much as the rest of the judge's

        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        bootstrap = (  # the harness as a module named otherwise than __main__, then the serving loop
            "import sys\nh = {'__name__': 'harness'}\n"
            "exec(compile(sys.stdin.read(), '<harness>', 'exec'), h)\n"
            f"h['serve_candidate']({req_r}, {rep_w})\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-I", "-c", bootstrap],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(req_r, rep_w), close_fds=True, start_new_session=False, cwd=CANDIDATE_DIR[0],
        )
        os.close(req_r)
        os.close(rep_w)
        self.rfd, self.wfd = rep_r, req_w
        return self.proc.stdin

    def decode(self, data: object, label: str) -> "Any":
        """The one door for a value from the candidate's process into the judge: plain data, handles to its objects
        and the builtins ``pure_builtin`` allows. Anything else means the candidate broke the protocol."""
        try:
            return from_wire(data, lambda rid: RemoteRef(self, rid, label), admit=pure_builtin)
        except (LookupError, ValueError, TypeError, ArithmeticError, RecursionError) as exc:
            raise self._broken(str(exc)[:MESSAGE_CHARS]) from None

    def _broken(self, why: str) -> CandidateGone:
        """A malformed or forged message: the child is stopped and the running test decided, as for a crash."""
        self.stop()
        return self.gone(f"the candidate broke the protocol: {why}")

    def gone(self, why: str) -> CandidateGone:
        """The exception for a candidate that cannot answer, with the judge told first: the test code may catch it
        (a bare ``except:`` around a call expected to raise), and it must not pass for the program's answer."""
        exc = CandidateGone(why)
        self.on_trouble(exc)
        return exc

    def _receive(self) -> "dict[str, Any]":
        try:
            reply = receive(self.rfd, self.budget)
        except (CandidateTimeout, CandidateGone) as exc:
            self.stop()
            self.on_trouble(exc)
            raise
        except ValueError as exc:
            raise self._broken(str(exc)) from None
        if type(reply) is not dict:
            raise self._broken("reply is not an object")
        return reply

    def request(self, ref: RemoteRef, op: str, fields: dict[str, object]) -> "Any":
        if not self.alive:
            raise self.gone("the candidate process is not running")
        if ref._generation != self.generation:
            raise self.gone("object from a candidate process that has since been restarted")
        try:
            send(self.wfd, {"op": op, "id": ref._rid, **fields})
        except OSError:  # it closed its end of the pipe, or died: no reply will ever be read
            self.stop()
            raise self.gone("the candidate process exited") from None
        reply = self._receive()
        if "exc" in reply:
            raise _exception_from(*self._exception_fields(reply["exc"]), op)
        if "ok" not in reply:
            raise self._broken("a reply with neither a value nor an exception")
        value = self.decode(reply["ok"], op)
        expected = _REPLY_TYPES.get(op)
        if expected is not None and type(value) is not expected:
            raise self._broken(f"{op!r} answered with a {type(value).__name__}")
        return value

    def _exception_fields(self, exc: object) -> tuple[str, str]:
        """(name, message) of an exception reply, as ``_describe`` writes it."""
        if type(exc) is list and len(exc) == 2 and type(exc[0]) is str and type(exc[1]) is str:
            return exc[0], exc[1]
        raise self._broken("malformed exception")

    def close(self) -> None:
        """The end of the run: the running child, and the forked one if no test ever needed it."""
        self.stop()
        if self.spare is not None:
            (self.proc, self.rfd, self.wfd), self.spare = self.spare, None
            self.stop()

    def stop(self) -> None:
        if self.proc is None:
            return
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self.proc = None


# What the op's answer must be (a forged one could otherwise hand ``iter`` a list, or ``len`` a handle).
_REPLY_TYPES: "dict[str, type]" = {"bool": bool, "len": int, "str": str, "iter": RemoteRef,
                                   "setattr": type(None), "setitem": type(None)}
# The modules the judge loaded before any candidate existed (its own, and those the reference imports): the only
# ones a module-valued name of the program can mean. judge_main fills it; nothing is imported on the program's word.
TRUSTED_MODULES: "dict[str, ModuleType]" = {}


def _preload(name: str) -> None:
    """A module the reference imports (argv), loaded from the judge's work-dir-free path before any candidate."""
    try:
        __import__(name)
    except BaseException:  # one this interpreter lacks: the tests' own import says so when they run
        pass


def _trusted_module(name: str, module: object) -> "ModuleType | None":
    """What the program's module-valued ``name`` (the module it named ``module``) is in the judge: the name of a
    module means that module (``import cmath as math`` is the judge's ``math``), any other name the module it
    names; only ever one already in TRUSTED_MODULES."""
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    if name in stdlib or name in TRUSTED_MODULES:
        return TRUSTED_MODULES.get(name)
    return TRUSTED_MODULES.get(module) if type(module) is str else None


def admit_names(names: dict[str, object], subjects: "Collection[str]",
                decode: "Callable[[object, str], Any]") -> dict[str, object]:
    """The program's names as the test code sees them; the reply they came in is data, and decides nothing here.
    Only identifiers, never a dunder: ``__builtins__`` would replace the tests' builtins, ``__eq__check`` their
    equality. A name Python itself provides (``range``, ``set``, ``abs``, ``math``) stays the judge's own unless the
    tests take it from the program (a function under test named ``sum``): otherwise ``def range(*a): return []``
    empties every test loop and a fake ``math.isclose`` agrees with anything. Modules: see ``_trusted_module``."""
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    admitted: dict[str, object] = {}
    for name, value in names.items():
        if type(name) is not str or not name.isidentifier() or name.startswith("__"):
            continue
        if type(value) is dict and len(value) == 1 and "$m" in value:  # the program bound a module
            module = _trusted_module(name, value["$m"])
            if module is not None and (name in subjects or not hasattr(builtins, name)):
                admitted[name] = module
        elif name in subjects or not (hasattr(builtins, name) or name in stdlib):
            admitted[name] = decode(value, name)
    return admitted


def _untrusted_path_entry(entry: str) -> bool:
    """The work dir (and anything under it) is writable by the candidate: the judge must never import from it."""
    cwd = os.path.realpath(os.getcwd())
    real = os.path.realpath(entry or ".")
    return real == cwd or real.startswith(cwd + os.sep)


def short_repr(value: object, limit: int = 120) -> str:
    try:
        text = repr(value)
    except Exception:  # an int past str()'s digit limit: the failure message must not turn into an error
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Judge:
    """Runs the transformed test code; ``__unit__(i)`` blocks mark the tests, ``__eq__check`` explains failures."""

    def __init__(self, job: "dict[str, Any]", report: "Callable[[dict[str, object]], None]",
                 spare: tuple[_Child, int, int] | None = None) -> None:
        self.job = job
        self.report = report
        self.timeouts: list[float] = job["timeouts"]  # each test's CPU seconds
        self.walls: list[float] = job.get("walls") or list(self.timeouts)  # and its wall-clock backstop
        self.stop_first: bool = job.get("stop_on_first_failure", False)
        self.candidate = Candidate(job["program"], job.get("path") or sys.path, self.mark_trouble, spare)
        self.namespace: dict[str, object] = {}  # run() gives it the test code's globals
        self.done: set[int] = set()
        self.unit: list[Any] | None = None  # [index, problem] of the running test
        self.last_compare: tuple[object, object] | None = None
        self.broken: str | None = None  # why the candidate cannot be (re)started
        self.program_names: dict[str, object] | None = None  # as the first load bound them (latest handles)

    def emit(self, index: int, status: str, message: str = "") -> None:
        if index in self.done:
            return
        self.done.add(index)
        self.report({"i": index, "s": status, "m": message[:MESSAGE_CHARS]})

    def ensure_candidate(self, cpu_s: float, wall_s: float) -> None:
        if self.candidate.alive:
            return
        if self.broken:
            raise CandidateGone(self.broken)
        try:
            wire = self.candidate.start(cpu_s + 2.0, wall_s + 2.0)  # + interpreter start-up
            names = admit_names(wire, self.job.get("subjects") or (), self.candidate.decode)
        except CandidateTimeout:
            self.broken = "the program did not finish loading in time"
            raise
        except CandidateGone as exc:
            self.broken = str(exc)
            raise
        if self.program_names is None:  # the first load, before the test code ran, fixes what the program provides
            self.program_names = names
            self.namespace.update(names)
        else:
            self.rebind(names)
        if self.job.get("setup"):
            exec(self.compiled("setup", "<test setup>"), self.namespace)  # noqa: S102 - the tests' own set-up

    def rebind(self, names: dict[str, object]) -> None:
        """After a restart the old handles are dead. Each handle the first load gave a program name now stands for
        the new process's object of that name, in place: wherever the test code keeps it (HumanEval's ``check``
        holds the function under test as its ``candidate`` argument; a list, a closure) the next test calls the
        restarted program. Bindings are not touched: a name the judge or the test code rebound since stays theirs.
        Names the first load did not have, or that are no handle now, are ignored, and handles the program handed
        out later (results of calls) stay dead: what the tests reach is what the judge trusted before the test code
        ran, never the restarted process's word."""
        for name, old in (self.program_names or {}).items():
            new = names.get(name)
            if type(old) is RemoteRef and type(new) is RemoteRef:
                old._follow(new)

    def mark_trouble(self, exc: BaseException) -> None:
        """A timeout, crash or broken protocol inside a test decides it, even if the test code caught the exception.
        Outside any test (check's own statements, set-up) it decides every test not yet decided, as it would have by
        ending the test code had the test code not caught it: a bare ``except:`` there must not turn the program's
        crash into the exception a later test expects."""
        timed_out = isinstance(exc, CandidateTimeout)
        if self.unit is None:
            for index in range(len(self.timeouts)):
                self.emit(index, "timeout" if timed_out else "error",
                          f"the program timed out: {exc}" if timed_out else str(exc))
        elif self.unit[1] is None:
            self.unit[1] = ("timeout", str(exc) or "timed out") if timed_out else ("error", str(exc))

    def compiled(self, key: str, filename: str) -> "Any":
        """The job's ``key`` code (tests or setup): the host's bytecode of it where this interpreter reads that
        bytecode (the job is the host's, read before any candidate existed), else compiled here from its text."""
        bytecode = self.job.get(key + "_bytecode")
        if bytecode and self.job.get("bytecode_magic") == BYTECODE_MAGIC:
            return marshal.loads(bytes.fromhex(bytecode))
        return compile(self.job[key], filename, "exec", dont_inherit=True)

    # -- called by the generated test code --
    def unit_scope(self, index: int) -> "_UnitScope":
        return _UnitScope(self, index)

    def compare_eq(self, left: object, right: object) -> object:
        equal = left == right
        if not equal:
            self.last_compare = (left, right)
        return equal

    def run(self) -> None:
        cpu_s, wall_s = (max(self.timeouts), max(self.walls)) if self.timeouts else (5.0, 17.0)
        self.namespace = {"__name__": "__tests__", "__builtins__": builtins}
        try:
            self.ensure_candidate(cpu_s, wall_s)
            self.candidate.budget = Budget(cpu_s, wall_s, self.candidate)  # check's own statements
            self.namespace.update(__unit__=self.unit_scope, __eq__check=self.compare_eq)
            exec(self.compiled("tests", "<tests>"), self.namespace)  # noqa: S102 - the test code
            why, status = "the test code ended before reaching this test", "error"
        except StopTests:
            why, status = "not run: stopped at the first failure", "skipped"
        except CandidateTimeout as exc:
            why, status = f"the program timed out: {exc}", "timeout"
        except CandidateGone as exc:
            why, status = str(exc), "error"
        except BaseException as exc:
            why, status = f"{type(exc).__name__}: {exc}", "error"
        for index in range(len(self.timeouts)):
            self.emit(index, status, why)
        self.candidate.close()


class _UnitScope:
    def __init__(self, judge: Judge, index: int) -> None:
        self.judge = judge
        self.index = index

    def __enter__(self) -> "_UnitScope":
        judge = self.judge
        if judge.unit is not None:
            raise RuntimeError("tests cannot nest")
        cpu_s, wall_s = judge.timeouts[self.index], judge.walls[self.index]
        judge.unit = [self.index, None]
        judge.last_compare = None
        try:
            judge.ensure_candidate(cpu_s, wall_s)  # a restart loads the program within a budget of its own
        except (CandidateTimeout, CandidateGone) as exc:
            judge.unit[1] = ("timeout" if isinstance(exc, CandidateTimeout) else "error", str(exc) or "timed out")
            raise
        judge.candidate.budget = Budget(cpu_s, wall_s, judge.candidate)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        judge = self.judge
        assert judge.unit is not None  # __enter__ set it
        index, problem = judge.unit
        judge.unit = None
        judge.candidate.budget = Budget(judge.timeouts[index], judge.walls[index], judge.candidate)  # check's own
        if exc_type is not None and issubclass(exc_type, (CandidateTimeout, CandidateGone)):
            problem = problem or (
                ("timeout", str(exc) or "timed out") if issubclass(exc_type, CandidateTimeout) else ("error", str(exc))
            )
        if problem is None:
            if exc_type is None:
                judge.emit(index, "passed")
                return False
            status = "failed" if issubclass(exc_type, AssertionError) else "error"
            message = str(exc) if str(exc) else exc_type.__name__
            if status == "error":
                message = f"{exc_type.__name__}: {exc}"
            elif judge.last_compare is not None and not str(exc):
                left, right = judge.last_compare
                message = f"got {short_repr(left)}, expected {short_repr(right)}"
            problem = (status, message)
        judge.emit(index, *problem)
        if judge.stop_first:
            raise StopTests()
        return True  # the next test still runs


_HARNESS_SOURCE = ""
CANDIDATE_DIR = ["."]  # the work dir the candidate runs in (the judge's own cwd is "/" once the candidate exists)


def _no_dump() -> bool:
    """Non-dumpable: same-uid processes (the candidate) can no longer ptrace us or open /proc/<pid>/{mem,fd}. Under
    the bwrap sandbox we already are (forked from its non-dumpable supervisor): our /proc files then belong to root
    and even we cannot open our own memory, which tells it without loading ctypes (a fifth of an interpreter's
    start-up)."""
    try:
        os.close(os.open("/proc/self/mem", os.O_RDONLY))
    except PermissionError:
        return True
    except OSError:
        pass
    try:
        import ctypes

        done: bool = ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
        return done
    except Exception:
        return False


def _own_source() -> str:
    try:
        path = sys.modules["__main__"].__file__
        if path is None:  # a __main__ without a file: nothing to read
            return ""
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (AttributeError, KeyError, OSError, TypeError):
        return ""


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def judge_main() -> None:
    global _HARNESS_SOURCE
    hardened = _no_dump()
    candidate_path = list(sys.path)
    sys.path[:] = [p for p in sys.path if not _untrusted_path_entry(p)]
    _HARNESS_SOURCE = _own_source()  # for restarts; read while no candidate exists to have touched the work dir
    # The reference's standard modules are loaded before the fork, so the program finds them loaded (a HumanEval
    # prompt's typing costs each program milliseconds otherwise): none keeps state from its import that a forked
    # child could replay (random reseeds itself in a child). Any other module is loaded after: what it makes at
    # import is the tests' alone (numpy's global generator, seeded then and not reseeded in a child, would hand the
    # program the "random" inputs and expected values its tests draw).
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    names = sys.argv[1:]
    for name in names:
        if name.split(".")[0] in stdlib:
            _preload(name)
    # Before the job (tests, nonce) exists anywhere in this process's memory; the child runs nothing until the
    # judge sends it the program, after the job is read.
    spare = fork_candidate()
    # The judge leaves the work dir, which the candidate writes: nothing the tests or a module they load lazily
    # reads by a relative name (a config file, a .pdbrc) can come from the candidate. Restarts start there.
    CANDIDATE_DIR[0] = os.getcwd()
    os.chdir("/")
    for name in names:  # the rest of the reference's modules, loaded before any candidate code runs
        if name.split(".")[0] not in stdlib:
            _preload(name)
    TRUSTED_MODULES.update((n, m) for n, m in sys.modules.items() if type(m) is type(sys) and n != "__main__")
    job = json_loads(_read_all(0))
    job["path"] = candidate_path
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the job (tests and nonce) leaves our file table
    out = os.dup(1)
    os.dup2(devnull, 1)  # stray prints from test code cannot reach the real stdout
    os.set_inheritable(out, False)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    nonce = job.pop("nonce")
    _HARNESS_SOURCE = job.pop("harness", None) or _HARNESS_SOURCE

    def report(record: dict[str, object]) -> None:
        os.write(out, f"{nonce} {json_dumps(record)}\n".encode())

    report({"hardened": hardened})
    judge = Judge(job, report, spare)
    judge.run()
    report({"done": True})
    os._exit(0)  # everything is written (unbuffered): skip the interpreter's teardown, a fifth of the run's CPU


if __name__ == "__main__":
    judge_main()
