"""TRL adapter for environments: classes for ``GRPOTrainer(environment_factory=...)``.

    from functools import partial
    from reward_client.trl_env import PythonEnvironment
    trainer = GRPOTrainer(model=..., train_dataset=ds, args=GRPOConfig(...),
                          environment_factory=partial(PythonEnvironment, url="http://127.0.0.1:8000"))

TRL makes one instance per rollout (and reuses them across batches), calls ``reset(**row)`` with the dataset row
before generation, turns every public method into a tool (its schema from the type hints and the Google-style
docstring), and calls ``get_reward()`` once the rollout is over. Here ``reset`` closes the instance's previous
session and opens one on the service, with the row's reward spec: the ``reward`` column (``{verifier, reference,
options}``) or else ``verifier``/``verifier_options`` columns (the class's ``verifier``/``options`` by default) and the
reference in ``reference_column`` (``answer``); the columns in ``task_columns`` go along as the environment's task
fields, the prompt's user turn as the task's ``prompt`` (the transcript the verifier reads opens with it), and
``seed`` when the row has one. The model answers with the ``final_answer`` tool, which ends the episode with its
reward (the verifier scores the session's transcript, whose last assistant turn is the answer); a rollout that never
called it is scored when ``get_reward`` closes the session with ``score``.

Infrastructure failures are masked, never scored 0: a tool call that meets ``SessionLost`` or ``InfraError`` raises
it (TRL shows the model ``{"error": ...}`` and counts a tool failure), later calls raise it again without a request,
and ``get_reward`` returns None. TRL 1.16 turns that None into NaN: a rollout whose every reward source is None is
left out of its group's baseline with advantage 0. Beside other ``reward_funcs`` it counts as 0 (TRL sums with
``nansum``), so to mask the whole rollout keep the environment's reward the only source, or have the other
functions return None for it too (``environments`` reach reward functions as a keyword: check
``env.failure``). A null verdict of the reward's verifier (a judge down) is None as well.

The service is ``url`` (a list, or commas, for several instances), else ``REWARD_CLIENT_URL``; every instance of one
class in a process shares one client.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from reward_client.environments import EnvClient, Session, Step, observation_text
from reward_client.errors import EpisodeFailed
from reward_client.protocol import join_urls
from reward_client.retry import trainer_policy

_clients: dict[tuple[str, str | None], EnvClient] = {}
_clients_lock = threading.Lock()


def shared_client(url: str | Sequence[str] | None = None, token: str | None = None) -> EnvClient:
    """One blocking client per process and settings, with the trainer adapters' retry policy."""
    key = (join_urls(url), token)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = EnvClient(key[0] or None, token=token, retry=trainer_policy())
        return _clients[key]


def reward_spec(row: Mapping[str, Any], verifier: str | None, reference_column: str | None,
                options: Mapping[str, Any]) -> dict[str, Any] | None:
    """How a row's episode is scored: its ``reward`` column, else the verifier (the row's ``verifier`` column, else
    the class's), its reference and options (the class's, overlaid with the row's ``verifier_options``, where None
    values, a dataset's padding, mean "not set"). None when neither names a verifier: the environment's default."""
    given = row.get("reward")
    if isinstance(given, Mapping) and given.get("verifier"):
        return {k: v for k, v in given.items() if v is not None}
    name = row.get("verifier") or verifier
    if not name:
        return None
    spec: dict[str, Any] = {"verifier": str(name)}
    if reference_column and row.get(reference_column) is not None:
        spec["reference"] = row[reference_column]
    merged = dict(options)
    extra = row.get("verifier_options")
    if isinstance(extra, Mapping):
        merged.update({k: v for k, v in extra.items() if v is not None})
    if merged:
        spec["options"] = merged
    return spec


def prompt_text(prompt: Any) -> str:
    """A row's prompt as one user message's text: a string, or the last user turn of a conversational prompt."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(list(prompt)):
            if isinstance(message, Mapping) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


class Environment:
    """Base of the environment classes: session handling, reward and masking. A subclass names ``env`` and defines
    the tools (public methods with a Google-style docstring) that call ``self._act(action)``; anything else it adds
    must start with ``_``, or TRL offers it to the model as a tool."""

    env: ClassVar[str] = ""
    verifier: ClassVar[str | None] = None
    options: ClassVar[dict[str, Any]] = {}
    reference_column: ClassVar[str | None] = "answer"
    task_columns: ClassVar[tuple[str, ...]] = ()
    step_timeout_s: ClassVar[float | None] = None  # None: the server's default per step
    show_reset: ClassVar[bool] = True  # append reset's observation (when it has text) to the prompt

    def __init__(self, url: str | Sequence[str] | None = None, *, token: str | None = None,
                 client: EnvClient | None = None) -> None:
        if not self.env:
            raise TypeError(f"{type(self).__name__} names no environment (class attribute env)")
        self._client = client or shared_client(url, token)
        self._session: Session | None = None

    @property
    def session(self) -> Session | None:
        return self._session

    @property
    def failure(self) -> EpisodeFailed | None:
        """The infrastructure failure that voided this rollout, if any (its reward is None)."""
        return self._session.failure if self._session is not None else None

    def reset(self, **row: Any) -> str | None:
        if self._session is not None:
            self._client.discard(self._session)
            self._session = None
        task = {k: row[k] for k in self.task_columns if row.get(k) is not None}
        if "prompt" not in task and "prompt" in self._client.task_fields(self.env):
            prompt = prompt_text(row.get("prompt"))
            if prompt:
                task["prompt"] = prompt  # the user's turn of the transcript the reward's verifier reads
        seed = row.get("seed")
        spec = reward_spec(row, self.verifier, self.reference_column, self.options)
        self._session = self._client.reset(self.env, seed=seed if isinstance(seed, int) else None, reward=spec,
                                           **task)
        text = self._reset_text(self._session.observation)
        return text or None

    def _reset_text(self, observation: Mapping[str, Any]) -> str:
        """What reset adds to the prompt: the observation's text (a database schema, a task), if any."""
        if not self.show_reset:
            return ""
        text = observation_text(observation)
        return "" if text == "(no output)" else "\n\n" + text

    def _act(self, action: Mapping[str, Any]) -> str:
        """One step of the session; the text the model reads. Raises ``EpisodeFailed`` on infrastructure failure."""
        if self._session is None:
            raise RuntimeError("the environment was not reset")
        if self._session.done:
            return "The episode is over: the answer was already given."
        return self._step_text(self._client.step(self._session, action, self.step_timeout_s))

    def _step_text(self, step: Step) -> str:
        return observation_text(step.observation)

    def get_reward(self) -> float | None:
        """The episode's reward: the one its final answer earned, else the server's score when the session closes
        (no answer given). None when the session failed (the rollout is masked) or the verdict is null."""
        session = self._session
        if session is None or session.failure is not None:
            return None
        try:
            if session.done:
                reward = session.reward
                self._client.discard(session)
                return reward
            step = self._client.close(session, score=True)
        except EpisodeFailed:
            return None
        return step.reward if step is not None else None


class AnsweringEnvironment(Environment):
    """An environment whose episode ends with the model's answer, scored by the row's reward spec."""

    def final_answer(self, answer: str) -> str:
        """Submit the final answer; this ends the episode.

        Args:
            answer: The final answer to the task.

        Returns:
            A confirmation that the answer was recorded.
        """
        if self._session is not None and self._session.done:
            return "The episode is over: the answer was already given."
        self._act({"final_answer": str(answer)})
        return "Answer recorded."


class PythonEnvironment(AnsweringEnvironment):
    """A persistent Python interpreter: variables, imports and files stay between calls of one rollout. Task
    columns: ``files`` (``{path: text}``), ``setup_code``."""

    env = "python"
    task_columns = ("files", "setup_code")

    def run_code(self, code: str) -> str:
        """Run a Python cell in a persistent interpreter; variables, imports and files persist between calls.

        Args:
            code: The cell: statements, and optionally a trailing expression whose value is shown.

        Returns:
            What the cell printed (stdout, stderr), the value of its trailing expression, or its traceback.
        """
        return self._act({"code": str(code)})


class SqlEnvironment(AnsweringEnvironment):
    """A read-only SQL database; the row's ``database`` column names it (one of the server's sql databases)."""

    env = "sql"
    task_columns = ("database",)

    def query(self, query: str) -> str:
        """Run one read-only SQL query (SELECT, WITH or VALUES) against the task's database.

        Args:
            query: The SQL statement to run.

        Returns:
            The columns and rows the query returned, or its error.
        """
        return self._act({"query": str(query)})


class BfclEnvironment(Environment):
    """BFCL's multi-turn tasks: the simulated APIs of the row's task (its ``task_id`` column naming one of the
    installed bfcl-eval tasks, or the task's own fields), BFCL's checks as the reward. The episode has BFCL's user
    turns: the model calls functions, then ends its turn, and the next user message comes back as the answer of
    ``end_turn``; the reward arrives when the last turn ends. The functions are the task's, so they vary by row: the
    model names them in ``call_functions`` (their docs are in the reset text appended to the prompt)."""

    env = "bfcl"
    reference_column = None
    task_columns = ("task_id", "id", "initial_config", "involved_classes", "question", "ground_truth",
                    "missed_function", "long_context")

    def call_functions(self, calls: str) -> str:
        """Call one or more of the task's functions; several calls run in order as parallel calls.

        Args:
            calls: The calls in Python syntax, e.g. [cd(folder='documents'), ls(a=True)], or as JSON
                [{"name": ..., "arguments": {...}}].

        Returns:
            Each call's result, or its error, as the functions return them.
        """
        return self._act({"content": str(calls)})

    def end_turn(self, message: str = "") -> str:
        """End your turn and answer the user; the user's next request follows, if there is one.

        Args:
            message: What you tell the user.

        Returns:
            The user's next message, or the end of the task.
        """
        return self._act({"content": str(message) or None, "end_turn": True})
