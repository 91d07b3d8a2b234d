"""verl's pieces as its entry points use them, for the verl adapter tests: the config Hydra composes for
``python -m verl.trainer.main_ppo OVERRIDES...``, a batch of rollouts as the reward loop receives it, and the event loop
verl's reward managers hold."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import verl
from hydra import compose, initialize_config_dir
from verl import DataProto
from verl.experimental.reward_loop import reward_loop
from verl.utils.ray_utils import get_event_loop


def verl_config(overrides: list[str]):
    """What ``python -m verl.trainer.main_ppo OVERRIDES...`` composes (its Hydra entry: config_name ppo_trainer)."""
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def rollouts(tokenizer_dir: Path, responses: list[str], truths: list[str], infos: list[dict]) -> DataProto:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    n = len(responses)
    prompts = tok(["Capital?"] * n, return_tensors="pt", padding="max_length", max_length=6)["input_ids"]
    resp = tok(responses, return_tensors="pt", padding="max_length", max_length=12, padding_side="right")
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp["input_ids"],
                 "attention_mask": torch.cat([torch.ones_like(prompts), resp["attention_mask"]], dim=1)},
        non_tensors={"data_source": np.array(["capitals"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object),
                     "extra_info": np.array(infos, dtype=object)},
    )


def run(w: reward_loop.RewardLoopWorker, data: DataProto) -> list[dict]:
    return get_event_loop().run_until_complete(w.compute_score_batch(data))  # the loop verl's managers hold
