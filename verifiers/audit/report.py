"""Audit reports: ``report.json`` and one self-contained ``report.html`` (inline CSS and SVG, no scripts, no
network assets), so a report can be mailed, archived with a training run, or opened offline."""
from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;color:#1d232a;
padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde3ea}
.meta{color:#5b6773}.meta code{background:#f2f5f8;padding:0 .3rem;border-radius:3px}
table{border-collapse:collapse;width:100%;margin:.6rem 0}th,td{border:1px solid #dde3ea;padding:.3rem .5rem;
text-align:left;vertical-align:top}th{background:#f2f5f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;max-height:12rem;overflow:auto;font-size:12px}
.bad{color:#b42318;font-weight:600}.ok{color:#067647}figure{margin:1rem 0}figcaption{color:#5b6773;font-size:12px}
"""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _rate(r: dict[str, Any]) -> str:
    if r.get("value") is None:
        return "n/a (no items)"
    return f"{_pct(r['value'])} [{_pct(r['low'])}, {_pct(r['high'])}] ({r['k']}/{r['n']})"


def bar_chart(svg_id: str, title: str, bars: list[tuple[str, dict[str, Any]]]) -> str:
    """Horizontal bars of rates in [0, 1] with 95% interval whiskers; one row per (label, rate dict)."""
    left, width, row = 190, 460, 30
    height = 40 + row * len(bars)
    parts = [f'<svg id="{escape(svg_id)}" xmlns="http://www.w3.org/2000/svg" width="{left + width + 150}" '
             f'height="{height}" role="img" aria-label="{escape(title)}">']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * width
        parts.append(f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="{height - 12}" stroke="#dde3ea"/>'
                     f'<text x="{x:.1f}" y="14" font-size="11" text-anchor="middle" fill="#5b6773">'
                     f'{int(tick * 100)}%</text>')
    for i, (label, rate) in enumerate(bars):
        y = 24 + i * row
        value = rate.get("value")
        parts.append(f'<text x="{left - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(label)}</text>')
        if value is None:
            parts.append(f'<text x="{left + 4}" y="{y + 15}" font-size="12" fill="#5b6773">no items</text>')
            continue
        colour = "#d92d20" if value > 0 else "#12b76a"
        parts.append(f'<rect class="bar" data-label="{escape(label)}" data-value="{value:.6f}" x="{left}" '
                     f'y="{y + 3}" width="{max(value * width, 1.5):.1f}" height="18" fill="{colour}" rx="2"/>')
        lo, hi = left + rate["low"] * width, left + rate["high"] * width
        parts.append(f'<line x1="{lo:.1f}" y1="{y + 12}" x2="{hi:.1f}" y2="{y + 12}" stroke="#1d232a"/>'
                     f'<line x1="{lo:.1f}" y1="{y + 7}" x2="{lo:.1f}" y2="{y + 17}" stroke="#1d232a"/>'
                     f'<line x1="{hi:.1f}" y1="{y + 7}" x2="{hi:.1f}" y2="{y + 17}" stroke="#1d232a"/>')
        parts.append(f'<text x="{left + width + 8}" y="{y + 15}" font-size="12">{_pct(value)} '
                     f'({rate["k"]}/{rate["n"]})</text>')
    parts.append("</svg>")
    return "".join(parts)


def confusion_svg(confusion: dict[str, int]) -> str:
    """The 2×2 matrix: rows are true labels, columns the verifier's verdict; shade by share of the row."""
    cell, left, top = 140, 150, 50
    cells = {("correct", "pass"): ("tp", "true positive"), ("correct", "fail"): ("fn", "false negative"),
             ("wrong", "pass"): ("fp", "false positive"), ("wrong", "fail"): ("tn", "true negative")}
    parts = [f'<svg id="confusion-matrix" xmlns="http://www.w3.org/2000/svg" width="{left + 2 * cell + 20}" '
             f'height="{top + 2 * cell + 20}" role="img" aria-label="confusion matrix">',
             f'<text x="{left + cell}" y="18" font-size="13" text-anchor="middle">verifier verdict</text>']
    for j, col in enumerate(("pass", "fail")):
        parts.append(f'<text x="{left + j * cell + cell / 2}" y="40" font-size="12" text-anchor="middle">'
                     f'{col}</text>')
    for i, label in enumerate(("correct", "wrong")):
        y = top + i * cell
        parts.append(f'<text x="{left - 10}" y="{y + cell / 2}" font-size="12" text-anchor="end">'
                     f'answer {label}</text>')
        row_total = sum(confusion[cells[(label, c)][0]] for c in ("pass", "fail")) or 1
        for j, col in enumerate(("pass", "fail")):
            key, name = cells[(label, col)]
            count = confusion[key]
            error = key in ("fp", "fn")
            shade = 0.12 + 0.8 * count / row_total
            fill = f"rgba(217,45,32,{shade:.2f})" if error else f"rgba(18,183,106,{shade:.2f})"
            x = left + j * cell
            parts.append(f'<rect class="cm-cell" data-cell="{key}" x="{x}" y="{y}" width="{cell - 4}" '
                         f'height="{cell - 4}" fill="{fill}" rx="4"/>'
                         f'<text class="cm-count" data-cell="{key}" x="{x + cell / 2 - 2}" y="{y + cell / 2}" '
                         f'font-size="26" text-anchor="middle">{count}</text>'
                         f'<text x="{x + cell / 2 - 2}" y="{y + cell / 2 + 24}" font-size="11" '
                         f'text-anchor="middle">{key.upper()}: {name}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _td(value: Any, cls: str = "", pre: bool = False) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    inner = f"<pre>{escape(text)}</pre>" if pre else escape(text)
    return f'<td class="{cls}">{inner}</td>' if cls else f"<td>{inner}</td>"


def _labelled_body(r: dict[str, Any]) -> str:
    c = r["confusion"]
    out = [
        "<h2>Confusion matrix</h2>",
        f'<figure>{confusion_svg(c)}<figcaption>{r["n"]} labelled items; '
        f'{len(r["unscored"])} without a score (kept out of the matrix).</figcaption></figure>',
        "<h2>Error rates (95% Wilson intervals)</h2>",
        f'<figure>{bar_chart("rates-chart", "error rates", [("FP rate ρ0", r["rho0"]), ("FN rate ρ1", r["rho1"])])}'
        "</figure>",
        _table(["rate", "estimate [95% interval] (k/n)"], [
            [_td("FP rate ρ0 = P(pass | wrong)"), _td(_rate(r["rho0"]))],
            [_td("FN rate ρ1 = P(fail | correct)"), _td(_rate(r["rho1"]))],
            [_td("accuracy"), _td(_rate(r["accuracy"]))],
        ]),
    ]
    if r.get("stored"):
        out.append(f'<p class="ok">Rates stored in the calibration store as source '
                   f'<code>{escape(r["stored"]["source"])}</code>.</p>')
    out.append(f'<h2>Disagreements ({len(r["disagreements"])})</h2>')
    if not r["disagreements"]:  # a table of headers alone reads as a rendering fault
        out.append('<p class="ok" id="no-disagreements">None: every scored verdict agrees with its label.</p>')
    else:
        out.append(_table(["#", "id", "kind", "status", "score", "reason", "response", "reference"], [
            [_td(d["index"], "num"), _td(d["id"] or ""), _td(d["kind"], "bad"), _td(d["status"]),
             _td(d["score"], "num"), _td(d["reason"]), _td(d["response"], pre=True), _td(d["reference"], pre=True)]
            for d in r["disagreements"]
        ]))
    if r["unscored"]:
        out.append(f'<h2>Without a score ({len(r["unscored"])})</h2>')
        out.append(_table(["#", "id", "status", "reason"], [
            [_td(d["index"], "num"), _td(d["id"] or ""), _td(d["status"]), _td(d["reason"])] for d in r["unscored"]
        ]))
    return "".join(out)


def _probes_body(r: dict[str, Any]) -> str:
    fams = r["families"]
    out = [
        "<h2>False-positive rate per attack family</h2>",
        f'<figure>{bar_chart("family-fp-chart", "FP rate per family", [(f, s["fp_rate"]) for f, s in fams.items()])}'
        f'<figcaption>{r["n_probes"]} probes from {r["n_references"]} references; every probe is an answer that '
        f'must not be rewarded. Overall FP rate {_rate(r["fp_rate"])}.</figcaption></figure>',
        _table(["family", "FP rate [95% interval] (k/n)", "without a score"], [
            [_td(f), _td(_rate(s["fp_rate"]), "bad" if s["fp"] else "ok"), _td(s["unscored"], "num")]
            for f, s in fams.items()
        ]),
    ]
    for family, s in fams.items():
        leaking = {v: x for v, x in s["variants"].items() if x["fp"]}
        if not leaking:
            continue
        out.append(f"<h2>{escape(family)}: variants that were rewarded</h2>")
        out.append(_table(["variant", "false positives", "probes"], [
            [_td(v), _td(x["fp"], "num bad"), _td(x["n"], "num")] for v, x in sorted(leaking.items())
        ]))
        out.append(_table(["row", "variant", "reference", "response", "score", "reason"], [
            [_td(e["row"], "num"), _td(e["variant"]), _td(e["reference"], pre=True), _td(e["response"], pre=True),
             _td(e["score"], "num"), _td(e["reason"])] for e in s["examples"]
        ]))
    return "".join(out)


def render_html(report: dict[str, Any]) -> str:
    kind = report["kind"]
    body = _labelled_body(report) if kind == "labelled" else _probes_body(report)
    title = f"{kind} audit of {report['verifier']}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(title.capitalize())}</h1>"
        f'<p class="meta">verifier <code>{escape(report["verifier"])}</code> version '
        f'<code>{escape(str(report["version"]))}</code>, configuration <code>{escape(report["calibration_key"])}'
        f'</code>, options <code>{escape(json.dumps(report["options"], ensure_ascii=False))}</code>, '
        f'created {escape(report["created_at"])}</p>'
        f"{body}</body></html>"
    )


def write_report(report: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "report.json", out / "report.html"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    html_path.write_text(render_html(report), encoding="utf-8")
    return json_path, html_path
