"""The typed-record layer, for the receipts' modules that import it from here: it lives in
:mod:`benchbox.typed`, below contracts and matrix plans, which it validates too."""

from benchbox.typed import (
    MaxLength,
    MinItems,
    Pattern,
    Range,
    Record,
    decode,
    encode,
    json_schema,
    plain,
    required,
    spec,
)

__all__ = ["MaxLength", "MinItems", "Pattern", "Range", "Record", "decode", "encode", "json_schema", "plain",
           "required", "spec"]
