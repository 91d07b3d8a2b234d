"""Small text helpers shared by rule-based verifiers."""
from __future__ import annotations

import re
import string
import unicodedata

_WS = re.compile(r"\s+")
_PUNCT = str.maketrans("", "", string.punctuation + "“”‘’«»…–—")


def normalize_text(text: str, *, case: bool = False, whitespace: bool = True, punctuation: bool = False) -> str:
    """Normalise for comparison; each flag says what to *ignore*."""
    text = unicodedata.normalize("NFKC", text)
    if not case:
        text = text.casefold()
    if punctuation:
        text = text.translate(_PUNCT)
    if whitespace:
        text = _WS.sub(" ", text).strip()
    return text
