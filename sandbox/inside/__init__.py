"""The programs that run inside a sandbox (README.md here): the host reads them as files and never imports them."""
from pathlib import Path

SUPERVISOR = Path(__file__).with_name("supervisor.py")  # bwrap's pid 1 in every sandbox
HARNESS = Path(__file__).with_name("harness.py")  # the code verifier's Python test harness, sent as a program
REPL = Path(__file__).with_name("repl.py")  # a session's persistent interpreter, sent as the program of a session job
