"""`lsp-agent doctor`: Python, git, ripgrep, the sandbox (a real probe), the model endpoint and
model, each MCP server (started for real: `mcp/probe.py`), and the settings in effect with where
each came from; `--json` for tools (the Neovim plugin's `:checkhealth` runs it)."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent import __version__

if TYPE_CHECKING:
    from lsp_agent.config import Settings

EXIT_FAILED = 1


async def doctor(*, as_json: bool = False) -> int:
    """Check the set-up; each check is `ok`, `bad` (a failure) or `info`. With `as_json`, one
    JSON object `{version, checks: [{name, status, detail}], config}` instead of the text."""
    from lsp_agent.config import load_settings

    checks: list[dict[str, str]] = []

    def line(name: str, ok: bool | None, detail: str) -> None:
        status = "info" if ok is None else "ok" if ok else "bad"
        checks.append({"name": name, "status": status, "detail": detail})
        if not as_json:
            mark = {"ok": "ok ", "bad": "BAD", "info": "-- "}[status]
            print(f"{mark}  {name:<10} {detail}")

    line("python", sys.version_info >= (3, 11), f"{platform.python_version()} ({sys.executable})")
    line("lsp-agent", True, __version__)
    git = shutil.which("git")
    line("git", git is not None, _version([git, "--version"]) if git else "not found on PATH")
    from lsp_agent.tools.files import find_rg

    try:
        rg = find_rg()
        line("ripgrep", True, f"{_version([rg, '--version'])} ({rg})")
    except Exception as error:
        line("ripgrep", False, str(error))
    from lsp_agent.safety.sandbox import probe

    sandbox = probe()
    if sandbox.sandboxed:
        line("sandbox", True, f"{sandbox.kind} ({sandbox.reason})")
        line("not stopped", None, sandbox.uncovered)
    else:
        # Not a failure: commands still run, each one after the user says yes.
        line("sandbox", None, f"none: {sandbox.reason}; every command will be asked")
    settings, warnings = load_settings()
    for warning in warnings:
        line("config", False, warning)
    await _check_endpoint(settings, line)
    from lsp_agent.mcp.probe import check_servers

    await check_servers(settings, Path.cwd(), _home(), line)
    described = settings.describe()
    if as_json:
        document = {"version": __version__, "checks": checks, "config": described}
        print(json.dumps(document, indent=2))
    else:
        print("config in effect:")
        for key, entry in described.items():
            print(f"     {key:<15} {_shown(entry['value']):<40} ({entry['source']})")
    return EXIT_FAILED if any(check["status"] == "bad" for check in checks) else 0


async def _check_endpoint(
    settings: Settings, line: Callable[[str, bool | None, str], None]
) -> None:
    """The endpoint answers and lists the model; what stops it is said on the endpoint's line
    (certificates that cannot be read included, which stop the provider from being made)."""
    from lsp_agent.model import ProviderError, make_provider

    try:
        provider = make_provider(
            settings.provider, settings.base_url, settings.model or "", settings.api_key
        )
    except ProviderError as error:
        line("endpoint", False, error.message)
        return
    try:
        models = await provider.list_models()
        line("endpoint", True, f"{settings.base_url} answers ({len(models)} models)")
        if settings.model is None:
            line("model", False, "not set: set LSP_AGENT_MODEL or lspAgent.model")
        elif models and settings.model not in models:
            line("model", False, f"{settings.model} is not listed by {settings.base_url}")
        else:
            line("model", True, settings.model)
    except ProviderError as error:
        line("endpoint", False, error.message)
    finally:
        await provider.aclose()


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no home directory to speak of
        return None


def _shown(value: Any) -> str:
    """A setting's value on one line: `not set`, a list of actions by their titles."""
    if value is None:
        return "not set"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        titles = [str(v.get("title") or v.get("tool") or "?") for v in value]
        return f"{len(value)}: " + ", ".join(titles)
    return str(value)


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run: {error}"
    return out.stdout.splitlines()[0] if out.stdout else out.stderr.strip()
