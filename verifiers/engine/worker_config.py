"""What a verifier worker process needs from its pool, passed on its command line instead of its environment."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's configuration: explicit, so it does what its pool asked whatever environment it inherits."""

    memory_mb: int = 0  # RLIMIT_AS once the verifiers are imported and warm (0: none)
    length_tokenizers: dict[str, str] = field(default_factory=dict)  # name -> local directory (length unit=tokens)
    sql_databases_dir: str = ""  # where the sql verifier finds its databases ("" : not configured)
    embedding_models: dict[str, str] = field(default_factory=dict)  # name -> local directory (text_similarity)

    def kind_settings(self) -> dict[str, object]:
        """What the kinds read through ``verifiers.context.process_setting``."""
        return {"length_tokenizers": dict(self.length_tokenizers), "sql_databases_dir": self.sql_databases_dir,
                "embedding_models": dict(self.embedding_models)}

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        return cls(**json.loads(text))

    def argv(self) -> list[str]:
        return ["--config", self.to_json()]


def parse_args(argv: list[str]) -> tuple[WorkerConfig, list[str]]:
    """A worker's ``[--config JSON] MODULE...`` as its config and its verifier modules."""
    if argv[:1] == ["--config"]:
        return WorkerConfig.from_json(argv[1]), argv[2:]
    return WorkerConfig(), argv
