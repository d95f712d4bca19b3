"""One version, one licence: the package, the extension and the changelog agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import lsp_agent

ROOT = Path(__file__).resolve().parent.parent


def test_the_extension_has_the_packages_version_and_licence() -> None:
    extension = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    assert extension["version"] == lsp_agent.__version__
    assert extension.get("license") == "MIT"


def test_the_package_metadata_reads_its_version_from_the_one_source() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert re.search(r'^version = "', pyproject, flags=re.MULTILINE) is None
    assert 'license = "MIT"' in pyproject
    assert (ROOT / "LICENSE").read_text().startswith("MIT")


def test_the_changelog_has_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {lsp_agent.__version__}" in changelog


def test_the_extension_offers_every_setting_the_server_reads() -> None:
    from lsp_agent import config

    extension = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    offered = {
        key.removeprefix("lspAgent.")
        for key in extension["contributes"]["configuration"]["properties"]
    }
    read = {spec.name for spec in config._SPECS} - {"apiKey"}  # the key lives in secret storage
    assert read <= offered, read - offered
    source = (ROOT / "editors" / "vscode" / "src" / "protocol.ts").read_text()
    listed = source.split("export const SERVER_SETTINGS = [", 1)[1].split("]", 1)[0]
    sent = set(re.findall(r"'([A-Za-z]+)'", listed))
    assert read == sent, read ^ sent  # what the extension sends to the server


def test_the_extension_mirrors_the_servers_protocol_names() -> None:
    """`protocol.ts` is the extension's one copy of `lsp_agent/lsp/names.py`."""
    from lsp_agent.lsp import names

    source = (ROOT / "editors" / "vscode" / "src" / "protocol.ts").read_text()
    mirrored = dict(re.findall(r"^export const ([A-Z_]+) = '([^']+)';$", source, re.MULTILINE))
    expected = {
        key: value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)
    }
    assert mirrored == expected
