"""Timing contracts: stages, declarations, the built-in registry."""

from benchbox.contracts.model import (
    ARRIVALS,
    DEFAULT_IDLE,
    DEVICE_STAGES,
    IDLE_MODES,
    QUEUE,
    STAGES,
    TIMELINE,
    Arrival,
    Contract,
    Policy,
    builtin_contracts,
    builtin_names,
    contract_from_dict,
    load_contract,
    parse_contract_toml,
)

__all__ = [
    "ARRIVALS", "DEFAULT_IDLE", "DEVICE_STAGES", "IDLE_MODES", "QUEUE", "STAGES", "TIMELINE", "Arrival",
    "Contract", "Policy", "builtin_contracts",
    "builtin_names", "contract_from_dict", "load_contract", "parse_contract_toml",
]
