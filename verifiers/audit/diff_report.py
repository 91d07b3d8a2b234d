"""The verifier-diff page: one self-contained ``report.html`` (the audit reports' inline CSS, ``<details>`` for
collapsing, no scripts, no network assets) to review the rows where two verifiers disagree."""
from __future__ import annotations

import json
from html import escape
from typing import Any

from verifiers.audit.report import _CSS, _table, _td

_DIFF_CSS = """
.card{border:1px solid #dde3ea;border-radius:6px;padding:.6rem .9rem;margin:1rem 0}
.card h3{font-size:1rem;margin:.1rem 0 .5rem}.card code{background:#f2f5f8;padding:0 .3rem;border-radius:3px}
.sides{display:grid;grid-template-columns:1fr 1fr;gap:.8rem}.side{background:#f8fafc;border-radius:4px;padding:.5rem}
.side h4{margin:0 0 .3rem}.side table{margin:0}details{margin:.4rem 0}summary{cursor:pointer;color:#344054}
.pill{display:inline-block;padding:0 .45rem;border-radius:9px;font-weight:600;background:#eef2f6}
.pill.s1{background:#d1fadf;color:#05603a}.pill.s0{background:#fee4e2;color:#912018}
"""


def _pill(category: str) -> str:
    cls = {"1": "s1", "0": "s0"}.get(category, "")
    return f'<span class="pill {cls}">{escape(category)}</span>'


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)


def _kv(rows: list[list[str]]) -> str:
    """A two-column table of labelled values, without a header row."""
    return "<table><tbody>" + "".join("<tr>" + "".join(r) + "</tr>" for r in rows) + "</tbody></table>"


def _side(s: dict[str, Any], category: str) -> str:
    rows = [
        [_td("status"), _td(s["status"])],
        [_td("score"), _td("null" if s["score"] is None else s["score"], "num")],
        [_td("reason"), _td(s["reason"])],
        [_td("extracted"), _td("" if s["extracted"] is None else _json(s["extracted"]), pre=True)],
    ]
    return (f'<div class="side"><h4>{escape(s["name"])} {_pill(category)}</h4>{_kv(rows)}'
            f"<details><summary>details</summary><pre>{escape(_json(s['details']))}</pre></details></div>")


def _card(d: dict[str, Any]) -> str:
    shown = len(d["response_tail"])
    what = "response" if shown >= d["response_chars"] else f"response (last {shown} of {d['response_chars']} chars)"
    return (
        f'<section class="card" id="row-{int(d["index"])}"><h3>row {int(d["index"])} · id '
        f'<code>{escape(str(d["id"]))}</code> · {escape(d["verifier"]["name"])} {_pill(d["pair"]["verifier"])} vs '
        f'{escape(d["against"]["name"])} {_pill(d["pair"]["against"])}</h3>'
        f'<div class="sides">{_side(d["verifier"], d["pair"]["verifier"])}'
        f'{_side(d["against"], d["pair"]["against"])}</div>'
        f"<details open><summary>reference</summary><pre>{escape(_json(d['reference']))}</pre></details>"
        f"<details><summary>{escape(what)}</summary><pre>{escape(d['response_tail'])}</pre></details></section>"
    )


def _pairs_table(s: dict[str, Any], key: str, names: tuple[str, str]) -> str:
    verdicts = key == "pairs"  # status pairs are a breakdown: ok/no_answer is a different status, the same reward
    return _table([names[0], names[1], "rows", "share", *([""] if verdicts else [])], [
        [_td(p["verifier"]), _td(p["against"]), _td(p["rows"], "num"),
         _td(f"{p['rows'] / max(s['rows'], 1):.1%}", "num"),
         *([_td("agree" if p["agree"] else "disagree", "ok" if p["agree"] else "bad")] if verdicts else [])]
        for p in s[key]
    ])


def render_diff_html(summary: dict[str, Any], disagreements: list[dict[str, Any]]) -> str:
    names = (summary["verifier"]["name"], summary["against"]["name"])
    title = f"Verifier diff: {names[0]} vs {names[1]}"
    rate = "n/a" if summary["agreement"] is None else f"{summary['agreement']:.2%}"
    overview = _kv([
        [_td("rows compared"), _td(summary["rows"], "num")],
        [_td("agree"), _td(f"{summary['agree']} ({rate})", "num")],
        [_td("disagree"), _td(summary["disagree"], "num bad" if summary["disagree"] else "num")],
        [_td("skipped (no response, unreadable row)"), _td(summary["skipped"], "num")],
        *([_td(f"{summary[side]['name']} options ({flag})"), _td(summary[side]["options"], pre=True)]
          for side, flag in (("verifier", "--options"), ("against", "--against-options"))),
    ])
    shown = len(disagreements)
    note = '<p class="ok" id="no-disagreements">None: both verifiers give the same verdict on every row.</p>' if (
        not summary["disagree"]) else "" if shown == summary["disagree"] else (
        f'<p class="meta">The first {shown} of {summary["disagree"]} disagreements are shown; '
        "<code>disagreements.jsonl</code> holds all of them.</p>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}{_DIFF_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p class="meta">input <code>{escape(summary["input"])}</code>, {escape(names[0])} version '
        f'<code>{escape(str(summary["verifier"]["version"]))}</code>, {escape(names[1])} version '
        f'<code>{escape(str(summary["against"]["version"]))}</code>, created {escape(summary["created_at"])}. '
        "A scored verdict counts as its score (ok 0, no_answer and rejected are all 0); a verdict without a score "
        "counts as its status, never as 0.</p>"
        f"<h2>Summary</h2>{overview}"
        f"<h2>Verdict pairs</h2>{_pairs_table(summary, 'pairs', names)}"
        f"<details><summary>status pairs</summary>{_pairs_table(summary, 'status_pairs', names)}</details>"
        f"<h2>Disagreements ({summary['disagree']})</h2>{note}"
        + "".join(_card(d) for d in disagreements)
        + "</body></html>"
    )
