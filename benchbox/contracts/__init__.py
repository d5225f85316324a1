"""Timing contracts: stages, declarations, the built-in registry."""

from benchbox.contracts.model import (
    DEVICE_STAGES,
    STAGES,
    Contract,
    Policy,
    builtin_contracts,
    builtin_names,
    contract_from_dict,
    load_contract,
    parse_contract_toml,
)

__all__ = [
    "DEVICE_STAGES", "STAGES", "Contract", "Policy", "builtin_contracts",
    "builtin_names", "contract_from_dict", "load_contract", "parse_contract_toml",
]
