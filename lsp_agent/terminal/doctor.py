"""`lsp-agent doctor`: Python, git, ripgrep, the sandbox (a real probe), the model endpoint and
model, and the settings in effect with where each came from."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys

from lsp_agent import __version__

EXIT_FAILED = 1


async def doctor() -> int:
    """Check the set-up and print what is in effect; non-zero when something is BAD."""
    from lsp_agent.config import load_settings
    from lsp_agent.model.provider import ProviderError, make_provider

    failures = 0

    def line(name: str, ok: bool, detail: str) -> None:
        nonlocal failures
        failures += 0 if ok else 1
        print(f"{'ok ' if ok else 'BAD'}  {name:<10} {detail}")

    line("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})")
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
    else:
        # Not a failure: commands still run, each one after the user says yes.
        print(f"--   {'sandbox':<10} none: {sandbox.reason}; every command will be asked")
    settings, warnings = load_settings()
    for warning in warnings:
        line("config", False, warning)
    provider = make_provider(
        settings.provider, settings.base_url, settings.model or "", settings.api_key
    )
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
    print("config in effect:")
    for key, entry in settings.describe().items():
        print(f"     {key:<15} {entry['value']!s:<40} ({entry['source']})")
    return EXIT_FAILED if failures else 0


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run: {error}"
    return out.stdout.splitlines()[0] if out.stdout else out.stderr.strip()
