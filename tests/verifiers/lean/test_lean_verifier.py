"""The lean verifier through a real Engine whose ``lean`` resource talks HTTP to the Kimina Lean server double.

Every static refusal is asserted to name its rule *and* to leave the double unasked; what only the server can see
(a sorry from a library tactic, an axiom behind a library lemma, a Lean error, its time limit) goes through it."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.lean_server import FakeLeanServer, Reply, serve
from tests.support.server import free_port
from verifiers.engine import Engine
from verifiers.engine.registry import load_modules
from verifiers.kinds.lean.client import LEAN, LeanClient
from verifiers.kinds.lean.protocol import Message, SnippetResult
from verifiers.kinds.lean.verifier import judge
from verifiers.types import Status, Verdict, VerifyItem

KEY = "lean-key-81c2"
REF = "theorem sq_pos_of_pos (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by sorry"
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"
GOOD = HEADER + "theorem sq_pos_of_pos (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by\n  positivity\n"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLeanServer]:
    with serve(FakeLeanServer(api_key=KEY)) as f:
        yield f


def run(url: str, items: list[VerifyItem], *, api_key: str | None = KEY, resources: bool = True,
        **client_kw: Any) -> tuple[list[Verdict], int]:
    """Verdicts of ``items`` (verified together) and the number of HTTP requests the client sent."""
    async def go() -> tuple[list[Verdict], int]:
        opts = {"max_retries": 1, "backoff_s": 0.01, "batch_wait_ms": 20.0, **client_kw}
        client = LeanClient(url, api_key, **opts)
        engine = Engine(load_modules(["verifiers.kinds.lean"]), resources={LEAN: client} if resources else {},
                        default_timeout_s=60)
        try:
            return await engine.verify_many(items), client.requests_sent
        finally:
            await client.aclose()

    return asyncio.run(go())


def lean(response: str, reference: Any = REF, **options: Any) -> VerifyItem:
    return VerifyItem("lean", response, reference, options)


def one(fake: FakeLeanServer, response: str, reference: Any = REF, **options: Any) -> Verdict:
    return run(fake.url, [lean(response, reference, **options)])[0][0]


def proof(body: str, before: str = "", after: str = "") -> str:
    return (f"```lean4\n{HEADER}{before}theorem sq_pos_of_pos (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by\n{body}\n"
            f"{after}```")


# --- accepted proofs -------------------------------------------------------------------------------------------


def test_full_file_proof_in_a_fence_is_accepted(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, "Here is the proof.\n" + proof("  positivity"))
    assert (v.status, v.score) == (Status.OK, 1.0), v.reason
    assert v.details["axioms"] == ["Classical.choice", "Quot.sound", "propext"]
    assert v.details["mode"] == "file" and v.details["source"] == "fenced:lean"
    sent = fake.snippets()[0]
    assert sent.startswith("import Mathlib\nimport Aesop") and sent.rstrip().endswith("#print axioms sq_pos_of_pos")
    assert sent.count("open BigOperators") == 1  # the copied preamble is dropped, the reference's is kept
    assert fake.requests[0]["timeout"] == 60 and fake.requests[0]["snippets"][0]["id"]


def test_tactics_only_and_whitespace_and_comments_in_the_statement(fake: FakeLeanServer) -> None:
    fake.reset()
    assert one(fake, "nlinarith [sq_nonneg x, h₀]").score == 1.0
    assert fake.snippets()[0].count("theorem sq_pos_of_pos (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by\n  nlinarith") == 1
    respaced = HEADER + "theorem sq_pos_of_pos (x:ℝ) /- positive -/ (h₀ : 0<x) :\n    x^2 > 0 := by\n  positivity"
    assert one(fake, respaced).score == 1.0
    # A sorry inside comments or a string is not code: no refusal, and Lean agrees.
    commented = proof("  -- no sorry here\n  /- nor /- sorry -/ here -/\n  have : \"sorry\" = \"sorry\" := rfl\n"
                      "  positivity")
    assert one(fake, commented).score == 1.0


def test_a_let_in_the_statement_is_part_of_the_statement(fake: FakeLeanServer) -> None:
    fake.reset()
    ref = "theorem t : let x := (3 : ℕ); x + x = 6 := by sorry"
    assert one(fake, "```lean\ntheorem t : let x := (3 : ℕ); x + x = 6 := by\n  decide\n```", ref).score == 1.0
    v = one(fake, "```lean\ntheorem t : let x := (0 : ℕ); x + x = 0 := by\n  decide\n```", ref)
    assert v.details["rule"] == "statement" and fake.calls == 1


def test_reference_with_its_own_header_and_dict_form(fake: FakeLeanServer) -> None:
    fake.reset()
    ref = {"header": "import Mathlib\nopen Real", "formal_statement": "theorem t1 : (2 : ℝ) + 2 = 4 := by sorry"}
    stated = "theorem t1 : (2:ℝ) + 2 = 4 := by norm_num\n```"
    assert one(fake, "```lean\nimport Mathlib\nopen Real\n" + stated, ref).score == 1.0
    assert fake.snippets()[0].startswith("import Mathlib\nopen Real\n\n")
    v = one(fake, "```lean\nimport Mathlib\nopen Nat\n" + stated, ref)
    assert v.details["rule"] == "scope"


# --- static refusals: each names its rule and never reaches the server ---------------------------------------------

HIDDEN = "instance : OfNat ℝ 5 := ⟨0⟩ -- \"\n"
REFUSED = {
    "changed type": ("statement", proof("  positivity").replace("x ^ 2 > 0", "x ^ 2 ≥ 0")),
    "changed binder": ("statement", proof("  positivity").replace("(x : ℝ)", "(x : ℕ)")),
    "dropped hypothesis": ("statement", proof("  positivity").replace(" (h₀ : 0 < x)", "")),
    "extra hypothesis": ("statement", proof("  positivity").replace("(h₀ : 0 < x)", "(h₀ : 0 < x) (h : False)")),
    "renamed": ("statement", proof("  positivity").replace("theorem sq_pos_of_pos", "theorem sq_pos_of_pos'")),
    "look-alike name": ("statement", proof("  positivity").replace("sq_pos_of_pos", "sq_pоs_of_pos")),  # Cyrillic о
    "look-alike binder": ("statement", proof("  positivity").replace("(x : ℝ)", "(х : ℝ)")),  # Cyrillic х
    "declared twice": ("statement", proof("  positivity", after=GOOD.split("\n", 5)[-1])),
    "private": ("statement", proof("  positivity").replace("theorem sq", "private theorem sq")),
    "attribute on it": ("statement", proof("  positivity").replace("theorem sq", "@[simp] theorem sq")),
    "sorry": ("sorry", proof("  sorry")),
    "admit": ("sorry", proof("  admit")),
    "comment closes early": ("sorry", proof("  /- done -/ sorry")),
    "helper with sorry": ("sorry", proof("  exact aux x h₀", "lemma aux (y : ℝ) (h : 0 < y) : y ^ 2 > 0 := sorry\n")),
    "axiom": ("axiom", proof("  exact cheat x", "axiom cheat (y : ℝ) : y ^ 2 > 0\n")),
    "native_decide": ("axiom", proof("  native_decide")),
    "sorryAx": ("sorry", proof("  exact sorryAx _ false")),
    "quoted sorryAx": ("sorry", proof("  exact _root_.«sorryAx» _ false")),
    "ofReduceBool": ("axiom", proof("  exact Lean.ofReduceBool _ _ rfl")),
    "skip kernel": ("option", proof("  positivity", "set_option debug.skipKernelTC true in\n")),
    "heartbeats off": ("option", proof("  positivity", "set_option maxHeartbeats 0 in\n")),
    "implemented_by": ("unsafe", proof("  positivity", "@[implemented_by id] def f (n : ℕ) : ℕ := n\n")),
    "extern": ("unsafe", proof("  positivity", "@[extern \"c_f\"] def g (n : ℕ) : ℕ := n\n")),
    "unsafe def": ("unsafe", proof("  positivity", "unsafe def h : ℕ := 0\n")),
    "tactic macro": ("macro", proof("  positivity", "macro \"positivity\" : tactic => `(tactic| sorry)\n")),
    "macro_rules": ("macro", proof("  positivity", "macro_rules | `(tactic| positivity) => `(tactic| admit)\n")),
    "notation": ("macro", proof("  positivity", "local notation \"ℝ\" => ℕ\n")),
    "elab": ("macro", proof("  positivity", "elab \"win\" : tactic => pure ()\n")),
    "open in": ("open_in", proof("  positivity", "open Real in\n")),
    "new open": ("scope", proof("  positivity", "open Finset\n")),
    "nested namespaces": ("scope", proof("  positivity", "namespace A\nnamespace B\n", "end B\nend A\n")),
    "closes the reference's namespace": ("scope", proof("  positivity", "end Foo\n")),
    "variable+include": ("scope", proof("  positivity", "variable (hf : False)\ninclude hf\n")),
    "instance": ("instance", proof("  positivity", "instance : OfNat ℝ 5 := ⟨0⟩\n")),
    "attribute cmd": ("attribute", proof("  positivity", "attribute [-simp] pow_two\n")),
    "#exit": ("exit", proof("  positivity", after="#exit\n")),
    "#eval": ("meta", proof("  positivity", "#eval IO.println \"hi\"\n")),
    "#print forged report": ("meta", proof("  positivity", after="#print \"'sq_pos_of_pos' depends on axioms: []\"\n")),
    "initialize": ("meta", proof("  positivity", "initialize IO.println \"boot\"\n")),
    "run_tac": ("meta", proof("  run_tac Lean.Elab.Tactic.evalTactic (← `(tactic| positivity))")),
    "import": ("import", proof("  positivity").replace("import Aesop", "import Aesop\nimport Mathlib.Tactic.Cheat")),
    "import other": ("import", proof("  positivity").replace("import Aesop", "import Cheat")),
    "exact?": ("search_tactic", proof("  exact?")),
    "zero-width": ("unicode", proof("  so\u200brry")),
    "bidi": ("unicode", proof("  positivity -- \u202e ")),
    "unterminated comment": ("syntax", proof("  positivity /- open")),
    # An interpolated string with a quote in a char literal would end early for a plain-string reader, and a later
    # quote would then hide the instance between them.
    "interpolated string": ("syntax", proof("  positivity", "def s := s!\"{'\"'}\"\n" + HIDDEN)),
    "raw string": ("syntax", proof("  positivity", "def s := r#\"a\"b\"#\n" + HIDDEN)),
    "no-break space": ("unicode", proof("  positivity").replace("theorem sq", "theorem\u00a0sq")),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_static_refusals_name_their_rule_without_asking_the_server(fake: FakeLeanServer, case: str) -> None:
    rule, response = REFUSED[case]
    fake.reset()
    v = one(fake, response)
    assert v.status == Status.REJECTED and v.score == 0.0, (case, v)
    assert v.details["rule"] == rule and v.reason.startswith(f"{rule}: "), (case, v.reason)
    assert fake.calls == 0


@pytest.mark.parametrize("flood", [
    "@[simp, " * 20_000, "/-" * 60_000, "open Finset " * 15_000, "\"" * 100_001, "section " * 30_000,
    "«" + "a" * 150_000, "open Real in " * 12_000, "(" * 100_000 + " := by", "lemma l " + "(" * 100_000,
], ids=lambda flood: f"{flood[:12]!r}x{len(flood)}")
def test_floods_are_answered_in_one_pass(fake: FakeLeanServer, flood: str) -> None:
    """Every scan is linear: a 100k-character hostile preamble is refused, or sent once, never hung on."""
    fake.reset()
    v = one(fake, proof("  positivity", flood + "\n"), max_proof_chars=400_000)
    assert v.status in (Status.REJECTED, Status.OK) and fake.calls == (v.status == Status.OK), v.reason[:200]


def test_search_tactics_can_be_allowed(fake: FakeLeanServer) -> None:
    fake.reset()
    assert one(fake, proof("  exact?"), allow_search_tactics=True).score == 1.0
    assert fake.calls == 1


def test_allowed_options_and_helper_lemmas_pass(fake: FakeLeanServer) -> None:
    fake.reset()
    assert one(fake, proof("  positivity", "section\nlemma l : True := trivial\nend\n")).score == 1.0
    helper = "@[simp] lemma aux (y : ℝ) (h : 0 < y) : y ^ 2 > 0 := by positivity\n\n" \
        "set_option maxHeartbeats 800000 in\n"
    v = one(fake, proof("  exact aux x h₀", helper))
    assert v.score == 1.0, v.reason


# --- what only the server sees ---------------------------------------------------------------------------------


def test_sorry_from_a_library_tactic_is_found_in_the_server_answer(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  lib_admit"))
    assert v.status == Status.REJECTED and v.details["rule"] == "sorry" and "server reports a sorry" in v.reason
    assert fake.calls == 1


def test_axiom_behind_a_library_lemma_is_found_by_print_axioms(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  exact lib_unsound x"))
    assert v.status == Status.REJECTED and v.details["rule"] == "axioms"
    assert "lib_unsound_ax" in v.reason


def test_a_forged_axiom_report_is_refused(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  trace_fake_report\n  positivity"))
    assert v.status == Status.REJECTED and v.details["rule"] == "axioms" and "its own axiom report" in v.reason


def test_lean_error_scores_zero_with_the_first_error(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  nlinarith [sq_nonneg x]\n  false_step"))
    assert (v.status, v.score) == (Status.OK, 0.0)
    assert v.details["rule"] == "lean_error" and "linarith failed" in v.reason and v.reason.startswith("Lean error at")


def test_lean_time_limit_is_timeout_and_the_limit_is_sent(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  slow_tactic"), lean_timeout_s=7)
    assert v.status == Status.TIMEOUT and v.score is None and "timed out in 7 seconds" in v.reason
    assert fake.requests[0]["timeout"] == 7


def test_no_answer_and_invalid_reference(fake: FakeLeanServer) -> None:
    fake.reset()
    assert one(fake, "   ").status == Status.NO_ANSWER
    assert one(fake, "```python\nprint(1)\n```").status == Status.NO_ANSWER
    assert one(fake, "by simp", "def f := 1").status == Status.INVALID_REFERENCE
    assert one(fake, "by simp", {"statement": 3}).status == Status.INVALID_REFERENCE
    assert one(fake, "by simp", "theorem t : True").status == Status.INVALID_REFERENCE
    unproved = one(fake, "by simp", "lemma h : False := sorry\ntheorem t : True := by sorry")
    assert unproved.status == Status.INVALID_REFERENCE
    assert "sorry: line 8: `sorry` leaves a goal unproved" in unproved.reason
    # Neither a reference nor default_header may run code on the Lean server.
    for header in ("import Mathlib\n#eval IO.Process.run {cmd := \"id\"}", "import Mathlib\nrun_cmd pure ()",
                   "import Mathlib\naxiom cheat : False", "import Mathlib\n#exit",
                   "import Mathlib\nnotation \"x\" => 1\n@[implemented_by id] def f (n : ℕ) := n"):
        v = one(fake, "by simp", {"header": header, "formal_statement": "theorem t : True := by sorry"})
        assert v.status == Status.INVALID_REFERENCE and "preamble" in v.reason, header
        v = one(fake, "by simp", "theorem t : True := by sorry", default_header=header)
        assert v.status == Status.INVALID_REFERENCE, header
    notation = {"header": "import Mathlib\nlocal notation \"𝔽\" => ℝ",
                "formal_statement": "theorem t : (1 : 𝔽) = 1 := sorry"}
    assert one(fake, "by norm_num", notation).score == 1.0  # notation of the problem itself is allowed
    assert fake.calls == 1  # only the accepted proof under the reference's own notation


# --- infrastructure trouble: never a score -----------------------------------------------------------------------


def test_server_down_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    v = run(url, [lean(proof("  positivity"))])[0][0]
    assert v.status == Status.UNAVAILABLE and v.score is None and "unavailable after 2 attempts" in v.reason


def test_5xx_after_retries_is_unavailable_and_a_retry_can_succeed(fake: FakeLeanServer) -> None:
    fake.reset()
    fake.queue(Reply(503), Reply(500))
    v = one(fake, proof("  positivity"))
    assert v.status == Status.UNAVAILABLE and "HTTP 500" in v.reason and fake.calls == 2
    fake.reset()
    fake.queue(Reply(502))
    assert one(fake, proof("  positivity")).score == 1.0 and fake.calls == 2


def test_wrong_key_is_unavailable_and_the_key_is_accepted_in_either_header(fake: FakeLeanServer) -> None:
    fake.reset()
    v = run(fake.url, [lean(proof("  positivity"))], api_key="wrong")[0][0]
    assert v.status == Status.UNAVAILABLE and "HTTP 401" in v.reason
    assert run(fake.url, [lean(proof("  positivity"))], api_key=None)[0][0].status == Status.UNAVAILABLE


def test_not_configured_is_unavailable_naming_the_setting(fake: FakeLeanServer) -> None:
    v = run(fake.url, [lean(proof("  positivity"))], resources=False)[0][0]
    assert v.status == Status.UNAVAILABLE and "REWARD_SERVICE_LEAN_SERVER_URL" in v.reason


@pytest.mark.parametrize("body", [
    "not json", '{"detail": "ok"}', '{"results": []}', '{"results": [{"id": "nope", "response": {"env": 0}}]}',
    '{"results": [{"id": "s0", "time": "fast", "response": {"env": 0}}]}',
    '{"results": [{"id": "s0", "response": {"messages": [{"severity": "loud", "pos": {}, "data": "x"}]}}]}',
])
def test_malformed_answers_are_errors(fake: FakeLeanServer, body: str) -> None:
    fake.reset()
    fake.queue(Reply(200, raw_body=body))
    v = one(fake, proof("  positivity"))
    assert v.status == Status.ERROR and v.score is None and "malformed Lean server answer" in v.reason


def test_repl_failure_and_missing_axiom_report_are_errors(fake: FakeLeanServer) -> None:
    fake.reset()
    v = one(fake, proof("  repl_panic"))
    assert v.status == Status.ERROR and "REPL failed" in v.reason
    empty = SnippetResult("s", messages=[Message("info", 1, 0, "something else")])
    with pytest.raises(Exception, match="no `#print axioms"):
        judge(empty, "t")


def test_axiom_report_parsing() -> None:
    report = Message("info", 9, 0, "'t' depends on axioms: [propext,\n Classical.choice, Quot.sound]")
    assert judge(SnippetResult("s", messages=[report]), "t").score == 1.0
    none = Message("info", 9, 0, "'t' does not depend on any axioms")
    assert judge(SnippetResult("s", messages=[none]), "t").score == 1.0
    sorry = Message("info", 9, 0, "'t' depends on axioms: [propext, sorryAx]")
    assert judge(SnippetResult("s", messages=[sorry]), "t").details["rule"] == "sorry"
    warned = [Message("warning", 3, 0, "declaration uses 'sorry'"), report]  # no sorries list: the warning says it
    assert judge(SnippetResult("s", messages=warned), "t").details["rule"] == "sorry"
    first = judge(SnippetResult("s", messages=[report, Message("error", 7, 2, "b"), Message("error", 4, 0, "a")]), "t")
    assert first.reason == "Lean error at 4:0: a" and first.details["errors"] == 2
    qualified = Message("info", 9, 0, "'Foo.«t»' depends on axioms: [propext]")
    assert judge(SnippetResult("s", messages=[qualified]), "t").score == 1.0
    other = Message("info", 9, 0, "'u' depends on axioms: []")
    with pytest.raises(Exception, match="no `#print axioms"):
        judge(SnippetResult("s", messages=[other]), "t")


# --- batching -------------------------------------------------------------------------------------------------


def test_a_batch_goes_to_the_server_as_batches(fake: FakeLeanServer) -> None:
    fake.reset()
    bodies = ["  positivity", "  nlinarith [sq_nonneg x]\n  false_step", "  lib_admit", "  slow_tactic"]
    items = [lean(proof(bodies[i % 4])) for i in range(70)] + [lean(proof("  sorry"))]
    verdicts, sent = run(fake.url, items, max_batch=32)
    assert sent == fake.calls == 3  # 70 snippets in chunks of 32; the static refusal is never sent
    assert sorted(len(r["snippets"]) for r in fake.requests) == [6, 32, 32]
    expected = [(Status.OK, 1.0), (Status.OK, 0.0), (Status.REJECTED, 0.0), (Status.TIMEOUT, None)]
    assert [(v.status, v.score) for v in verdicts[:70]] == [expected[i % 4] for i in range(70)]
    assert verdicts[70].details["rule"] == "sorry"


def test_different_time_limits_travel_in_different_requests(fake: FakeLeanServer) -> None:
    fake.reset()
    items = [lean(proof("  positivity"), lean_timeout_s=t) for t in (5, 5, 9)]
    verdicts, sent = run(fake.url, items)
    assert all(v.score == 1.0 for v in verdicts) and sent == 2
    assert sorted(r["timeout"] for r in fake.requests) == [5, 9]


def test_a_1x_server_is_spoken_to_through_verify(fake: FakeLeanServer) -> None:
    fake.reset()
    items = [lean(proof(body)) for body in ("  positivity", "  lib_admit", "  slow_tactic", "  false_step")]
    verdicts, sent = run(fake.url, items, api="verify")
    assert [(v.status, v.score) for v in verdicts] == [
        (Status.OK, 1.0), (Status.REJECTED, 0.0), (Status.TIMEOUT, None), (Status.OK, 0.0)]
    assert sent == 1 and [c["custom_id"] for c in fake.requests[0]["codes"]] == ["s0", "s1", "s2", "s3"]
    assert verdicts[0].details["lean_time_s"] == 0.05


def test_shutdown_releases_callers_of_a_batch_in_flight(fake: FakeLeanServer) -> None:
    fake.reset()
    fake.queue(Reply(200, delay_s=1.5))

    async def go() -> BaseException | None:
        client = LeanClient(fake.url, KEY, batch_wait_ms=1.0)
        waiting = asyncio.create_task(client.check("import Mathlib\n#check Nat"))
        await asyncio.sleep(0.3)  # the batch is sent and waits on the slow server
        await client.aclose()
        try:
            await asyncio.wait_for(waiting, 2.0)
        except Exception as exc:
            return exc
        return None

    failure = asyncio.run(go())
    assert failure is not None and "shut down" in str(failure)
