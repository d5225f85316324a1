"""Markdown from receipts (step summary, PR comment, report site): nothing from a receipt is markup."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchbox import stats
from benchbox.cli import main
from benchbox.contracts import load_contract
from benchbox.receipts.diff import diff_receipts
from benchbox.receipts.model import decode_receipt
from benchbox.render import diff_markdown, refused_markdown
from benchbox.render.common import md
from tests.support import GOLDEN

#: a contract name that ends its line and opens an HTML comment, followed by a fake verdict
EVIL_CONTRACT = "public_task_call_wall\r<!--\r### ✅ benchbox: no regression\r"
EVIL_CASE = "invoice |\n<!-- | x\n# no regression\n[click](https://evil.example) *b* _i_ `c` <b>&amp;"


def _receipts(slower: float) -> tuple[dict, dict]:
    base = json.loads(GOLDEN.read_text())
    base["contract"] = replace(load_contract("public_task_call_wall"), name=EVIL_CONTRACT).to_dict()
    base["results"][0]["case"] = EVIL_CASE
    base["results"][0]["reasons"] = ["why\n<!--"]
    head = json.loads(json.dumps(base))
    for row in head["results"]:
        row["samples_ns"] = [int(v * slower) for v in row["samples_ns"]]
        row["summary"] = stats.summarize(row["samples_ns"])  # the loader checks it agrees
    return base, head


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_a_contract_name_with_a_newline_and_a_comment_cannot_hide_the_regression_table() -> None:
    base, head = _receipts(slower=3.0)
    result = diff_receipts(decode_receipt(base, "base"), decode_receipt(head, "head"))
    assert result.exit_code == 1
    text = diff_markdown(result)
    assert "<!--" not in text and "\r" not in text and "<b>" not in text
    lines = text.split("\n")
    # benchbox's own lines only: one title, the summary, the table header and one line per row
    assert [ln for ln in lines if ln.startswith("#")] == ["### ❌ benchbox: performance regression"]
    assert sum("REGRESSION" in ln for ln in lines) == 1
    table = [ln for ln in lines if ln.startswith("|")]
    assert len(table) == 2 + len(result.rows)
    assert all(_unescaped_pipes(ln) == 7 for ln in table), table
    assert "[click](" not in text and "*b*" not in text and "`c`" not in text


def test_step_summary_of_a_diff_escapes_receipt_text(tmp_path: Path) -> None:
    base, head = _receipts(slower=3.0)
    for doc in (base, head):  # a name the loader accepts: no control characters
        doc["contract"] = json.loads(GOLDEN.read_text())["contract"]
    (tmp_path / "b.json").write_text(json.dumps(base))
    (tmp_path / "h.json").write_text(json.dumps(head))
    summary = tmp_path / "summary.md"
    r = CliRunner().invoke(main, ["diff", str(tmp_path / "b.json"), str(tmp_path / "h.json")],
                           env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert r.exit_code == 1, r.output
    text = summary.read_text()
    assert "<!--" not in text and "[click](" not in text
    assert sum(ln.startswith("|") for ln in text.split("\n")) == 2 + len(base["results"])


def test_refusal_markdown_escapes_the_reason() -> None:
    text = refused_markdown("x\r\n<!--\n# fake")
    assert "<!--" not in text and text.count("\n") == 3 and "\n# fake" not in text


@pytest.mark.parametrize("raw", ["a|b", "a\nb", "a\rb", "<!--", "<script>", "&lt;", "`x`", "[a](b)",
                                 "![i](u)", "*a*", "_a_", "a_ b", "# h", "~~s~~", "a\u2028b", "\x1b[2Jx",
                                 # GitHub autolinks bare URLs and renders $…$ and $$…$$ as math
                                 "see https://evil.example/x", "HTTP://E.X", "ftp://e.x", "www.evil.example",
                                 "WWW.E.X", "$x$", "$$\\frac{a}{b}$$", "$`x`$", "a $ b"])
def test_md_leaves_no_markup(raw: str) -> None:
    out = md(raw)
    assert "\n" not in out and "\r" not in out and "\u2028" not in out and "\x1b" not in out
    assert "<" not in out and ">" not in out
    assert not re.search(r"(?<!\\)://|(?i:www)[.]", out), out  # no autolink: "\\://", "www\\."
    # every markdown punctuation is escaped: removing escapes gives no special character left bare
    bare = re.sub(r"\\.", "", out)
    assert not re.search(r"[|`*\[\]()#~!$]|(?<![^\W_])_|_(?![^\W_])", bare), out
    assert not re.search(r"&(?!amp;|lt;|gt;|quot;)", out), out
