"""Runs notebook cells in order in one interpreter, as a Jupyter kernel would (POST /run_jupyter): each cell's
stdout, stderr, the value of its last expression (``display``) and its exception (``error``) are written as one
line, tagged with the request's nonce, to the real stdout. A failing cell does not stop the next. Run as the program
of one sandbox run; the cells are the caller's own code, so nothing here is hidden from them."""
import ast
import contextlib
import io
import json
import signal
import sys
import traceback
from types import FrameType
from typing import Any


class CellTimeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CellTimeout("the cell ran past cell_timeout")


def _run_cell(source: str, index: int, namespace: dict[str, Any], timeout: float) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    display: list[dict[str, str]] = []
    error: list[dict[str, Any]] = []
    name = f"<cell {index}>"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if timeout > 0:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            tree = ast.parse(source, name)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body[-1].value)
                tree.body.pop()
            exec(compile(tree, name, "exec"), namespace)  # noqa: S102 - the cells are the program
            if last is not None:
                value = eval(compile(last, name, "eval"), namespace)  # noqa: S307 - as a kernel does
                if value is not None:
                    namespace["_"] = value
                    display.append({"text/plain": repr(value)})
        except BaseException as exc:  # a cell's SystemExit or KeyboardInterrupt is its error, as in a kernel
            error.append({"ename": type(exc).__name__, "evalue": str(exc),
                          "traceback": traceback.format_exception(exc)})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {"stdout": out.getvalue(), "stderr": err.getvalue(), "display": display, "error": error}


def main() -> None:
    job = json.loads(sys.stdin.read())
    real = sys.stdout
    signal.signal(signal.SIGALRM, _alarm)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    for index, source in enumerate(job["cells"]):
        result = _run_cell(source, index, namespace, float(job["cell_timeout"]))
        real.write(job["nonce"] + " " + json.dumps({"i": index, **result}) + "\n")
        real.flush()


main()
