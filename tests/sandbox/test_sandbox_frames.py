"""The supervisor runs as a file inside the sandbox and cannot import the host's ``FrameKind``: it writes the letters
itself. Read from its source, they must be the enum's (and the host's one answer, ``GO``), and so must the list of
kinds its docstring gives. Case matters: ``c`` and ``C`` are two kinds."""
from __future__ import annotations

import ast
import re

from sandbox.bwrap.frames import GO, FrameKind
from sandbox.inside import SUPERVISOR

EXPECTED = {kind.value for kind in FrameKind} | {GO}


def letters_in_code(tree: ast.Module) -> set[bytes]:
    """Every one-letter bytes literal of the code (the docstring is a str, so not among them)."""
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, bytes)
            and len(node.value) == 1 and node.value.isalpha()}


def letters_in_docstring(tree: ast.Module) -> set[bytes]:
    """The kinds the docstring's paragraph on frames names: its one-letter words, but the article."""
    doc = ast.get_docstring(tree) or ""
    paragraph = next(p for p in doc.split("\n\n") if p.startswith("Everything on the result fd is a frame"))
    return {w.encode() for w in re.findall(r"(?<![\w'])([A-Za-z])(?![\w'])", paragraph) if w != "a"}


def test_the_supervisor_writes_the_hosts_frame_kinds() -> None:
    assert len(EXPECTED) == len(FrameKind) + 1  # GO is no frame kind
    assert letters_in_code(ast.parse(SUPERVISOR.read_text())) == EXPECTED


def test_the_supervisors_docstring_lists_the_same_kinds() -> None:
    assert letters_in_docstring(ast.parse(SUPERVISOR.read_text())) == EXPECTED


def test_a_drifted_letter_is_seen() -> None:
    """The readings above see a letter that drifts, in the code and in the docstring, so equal sets mean something."""
    source = SUPERVISOR.read_text().replace('_send(b"Z"', '_send(b"X"', 1).replace("the manager exited: Z,", "X,", 1)
    tree = ast.parse(source)
    assert b"X" in letters_in_code(tree) and b"X" in letters_in_docstring(tree)
