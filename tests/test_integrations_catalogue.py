"""The integrations' catalogue: one package per library, each declaration complete, readable
without importing its library, and naming only what the library really has."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import subprocess
import sys

import pytest

import spanledger.integrations
from spanledger.capture.declaration import Integration
from spanledger.integrations import INTEGRATIONS

LIBRARIES = sorted({integration.name for integration in INTEGRATIONS} | {"torch", "boto3"})


def home(integration: Integration) -> str:
    """The integration's package: where the modules it names live."""
    named = integration.installs or integration.creation or ""
    return named.rsplit(".", 1)[0]


def test_every_integration_package_is_in_the_catalogue_once() -> None:
    packages = {
        module.name
        for module in pkgutil.iter_modules(spanledger.integrations.__path__)
        if module.ispkg
    }
    declared = [home(integration).split(".")[2] for integration in INTEGRATIONS]
    assert sorted(declared) == sorted(packages)
    assert len({integration.name for integration in INTEGRATIONS}) == len(INTEGRATIONS)


def test_reading_the_declarations_imports_no_library() -> None:
    code = (
        "import sys, spanledger.integrations, spanledger.instrumentation; "
        f"print(sorted(m for m in {LIBRARIES!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("integration", INTEGRATIONS, ids=lambda i: i.name)
def test_a_declaration_names_modules_of_its_own_package_that_do_their_part(
    integration: Integration,
) -> None:
    package = home(integration)
    if integration.installs is not None:
        assert integration.installs.startswith(package + ".")
        assert callable(integration.installer().install)
    else:
        assert integration.creation is not None, "an integration installs or hooks something"
    if integration.creation is not None:
        assert integration.creation.startswith(package + ".")
        hook = integration.creation_hook()
        assert hook is not None
        assert callable(hook.hook)
    assert integration.tested, "a declaration names the versions its tests cover"
    for lowest, below in integration.tested:
        assert lowest < below


@pytest.mark.parametrize("integration", INTEGRATIONS, ids=lambda i: i.name)
def test_every_method_a_declaration_patches_exists_in_the_installed_library(
    integration: Integration,
) -> None:
    assert integration.untested() is None, integration.untested()
    for method in integration.methods:
        owner = getattr(importlib.import_module(method.module), method.owner)
        assert callable(getattr(owner, method.name)), f"{method.owner}.{method.name}"
    assert integration.missing_methods() == ()
