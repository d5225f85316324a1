"""Receipts: the versioned record of a run, its schema, loading, and diffing."""

from benchbox.receipts.io import (
    SCHEMA_VERSION,
    load_receipt,
    parse_receipt,
    schema_path,
    write_receipt,
)

__all__ = ["SCHEMA_VERSION", "load_receipt", "parse_receipt", "schema_path", "write_receipt"]
