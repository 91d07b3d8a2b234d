"""The bfcl tests need bfcl-eval (``pip install --no-deps bfcl-eval``, as scripts/setup.sh installs it)."""
from __future__ import annotations

import pytest

from verifiers.kinds.bfcl import source


@pytest.fixture(autouse=True)
def _needs_bfcl_eval() -> None:
    if not source.available():
        pytest.skip("bfcl-eval is not installed (scripts/setup.sh: pip install --no-deps bfcl-eval)")
