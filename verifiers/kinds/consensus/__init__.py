"""Label-free rewards: a group's consensus answer as the pseudo-label (see ``verifier``)."""
from verifiers.kinds.consensus.verifier import VERIFIERS, ConsensusVerifier

__all__ = ["VERIFIERS", "ConsensusVerifier"]
