"""Rendering for people and tools: terminal tables, markdown, JSON. Only the CLI prints them."""

from benchbox.render.diff import diff_json, diff_markdown, diff_table, refused_markdown
from benchbox.render.text import fallback_summary, results_table, side_by_side

__all__ = ["diff_json", "diff_markdown", "diff_table", "fallback_summary", "refused_markdown",
           "results_table", "side_by_side"]
