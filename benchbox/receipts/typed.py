"""The typed-record layer under the name the receipts' modules import: it lives in
:mod:`benchbox.typed`, below contracts and matrix plans, which it validates too."""

from typing import Any

import benchbox.typed as _typed


def __getattr__(name: str) -> Any:
    return getattr(_typed, name)
