"""Rule rewards for vision-language and agent outputs written as text: grounding boxes and clicks, GUI actions,
temporal segments, QA answers, rankings and text similarity."""
from __future__ import annotations

from typing import Any

from verifiers.base import Verifier
from verifiers.kinds.rules.grounding import GroundingVerifier
from verifiers.kinds.rules.gui import GuiActionVerifier
from verifiers.kinds.rules.qa import QAVerifier
from verifiers.kinds.rules.ranking import RankingVerifier
from verifiers.kinds.rules.similarity import TextSimilarityVerifier
from verifiers.kinds.rules.temporal import TemporalGroundingVerifier

VERIFIERS: list[Verifier[Any]] = [
    GroundingVerifier(), GuiActionVerifier(), TemporalGroundingVerifier(), QAVerifier(), RankingVerifier(),
    TextSimilarityVerifier(),
]
