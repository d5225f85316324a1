"""The runner registry: each runner's option keys are declared once, in a module that does not
import torch, and the registry refuses a mistyped key as the runner itself would."""

from __future__ import annotations

import importlib

import pytest

from benchbox.errors import UsageError
from benchbox.runners import ENTRIES, check_option_keys, runner_class


@pytest.mark.parametrize("name", list(ENTRIES))
def test_the_registry_names_the_very_keys_the_runner_class_takes(name: str) -> None:
    entry = ENTRIES[name]
    assert entry.option_keys is not None, f"{name} declares no option keys in the registry"
    module, _, attr = entry.option_keys.partition(":")
    assert getattr(importlib.import_module(module), attr) is runner_class(name).OPTION_KEYS


@pytest.mark.parametrize("name", list(ENTRIES))
def test_a_mistyped_key_is_refused_by_the_registry_as_by_the_runner(name: str) -> None:
    with pytest.raises(UsageError) as by_registry:
        check_option_keys(name, {"no_such_key": 1})
    with pytest.raises(UsageError) as by_runner:
        runner_class(name).check_options({"no_such_key": 1})
    assert str(by_registry.value) == str(by_runner.value)
    assert str(by_registry.value).startswith(f"{name}: unknown option 'no_such_key' (options: ")


def test_known_keys_pass_the_registry() -> None:
    check_option_keys("torch-compile", {"mode": "default", "transfer": "auto"})
    check_option_keys("torch-eager", {})
    check_option_keys("not-a-runner", {"anything": 1})  # unknown runners are refused elsewhere, by name
