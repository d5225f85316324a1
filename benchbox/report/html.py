"""The building blocks of the report site's HTML: escaping, embedded JSON, file names, commit
links, times, durations and the page around a body."""

from __future__ import annotations

import hashlib
import html
import json
import re
from typing import Any
from urllib.parse import quote

from benchbox import __version__
from benchbox.durations import duration_text
from benchbox.errors import FieldError
from benchbox.report.history import Page, ReceiptRef

VERDICT_CLASS = re.compile(r"[^a-z]+")


def esc(x: Any) -> str:
    """HTML-escape anything (text and attribute values alike)."""
    return html.escape("" if x is None else str(x), quote=True)


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")
    return s[:60] or "x"


def page_file(page: Page) -> str:
    return f"{slug(page.task)}.{slug(page.contract.name)}-{page.contract_hash[:12]}.html"


def diff_file(base: tuple[str, ...], head: tuple[str, ...], ext: str = "html") -> str:
    """The diff page of a change point: named by its two sides' receipts."""
    key = hashlib.sha256(("\n".join(base) + "|" + "\n".join(head)).encode()).hexdigest()[:16]
    return f"diffs/{head[0][:12]}-{len(base)}v{len(head)}-{key}.{ext}"


def receipt_file(identity: str) -> str:
    return f"receipts/{identity}.json"


def verdict_class(verdict: str) -> str:
    return "v-" + VERDICT_CLASS.sub("-", verdict.lower()).strip("-")


def check_commit_url(template: str | None) -> str | None:
    """A ``--commit-url`` template must name ``{commit}`` once or more, and nothing else in braces."""
    if template is None:
        return None
    if "{commit}" not in template or re.search(r"\{(?!commit\})[^}]*\}", template):
        raise FieldError("commit_url", f"the template must contain {{commit}} and no other {{...}} field, "
                                       f"got {template!r}")
    return template


def commit_href(template: str | None, commit: str | None) -> str | None:
    if not template or not commit:
        return None
    return template.replace("{commit}", quote(commit, safe=""))


def commit_html(template: str | None, ref: ReceiptRef) -> str:
    href = commit_href(template, ref.commit)
    code = f"<code>{esc(ref.short)}</code>"
    return f'<a class="commit" href="{esc(href)}">{code}</a>' if href else code


def when(created_at: str | None) -> str:
    """A receipt's time, short (``2026-03-03 16:00``), the full stamp on hover."""
    if not created_at:
        return "–"
    stamp = re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", created_at)
    short = created_at[:16].replace("T", " ") if stamp else created_at
    return f'<time datetime="{esc(created_at)}" title="{esc(created_at)}">{esc(short)}</time>'


def ms(ns: float | None) -> str:
    return duration_text(ns)


def doc(title: str, body: str, depth: int = 0, data: Any = None) -> str:
    up = "../" * depth
    data_el = (f'<script src="{up}assets/uPlot.iife.min.js"></script>\n'
               f'<script type="application/json" id="history-data">{script_json(data)}</script>\n'
               f'<script src="{up}assets/history.js"></script>\n') if data is not None else ""
    chart_css = f'<link rel="stylesheet" href="{up}assets/uPlot.min.css">\n' if data is not None else ""
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n"
            f"<link rel=\"icon\" href=\"data:,\">\n{chart_css}"
            f"<link rel=\"stylesheet\" href=\"{up}assets/history.css\">\n</head>\n<body>\n"
            f"{body}\n<footer>benchbox {esc(__version__)} · static files, no server needed · charts by "
            f"<a href=\"{up}assets/uPlot.LICENSE\">uPlot</a> (MIT)</footer>\n"
            f"{data_el}</body>\n</html>\n")
