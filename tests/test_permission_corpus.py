"""The permission wall against the adversarial corpus (tests/permission_corpus.py), through the
decision function: every attack of every class is asked or denied, every harmless command runs
without a question. The same corpus runs end to end in tests/test_e2e_permission_corpus.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lsp_agent.safety.permissions import ALLOW, DENY, Verdict, decide_command
from lsp_agent.safety.sandbox import Availability, Sandbox
from lsp_agent.tools.shell import run_env
from tests.permission_corpus import (
    ATTACKS,
    HARMLESS,
    AttackWorkspace,
    attack_workspace,
    canary_name,
    fill,
    harmless_workspace,
)
from tests.permission_corpus import DENY as MUST_DENY

PORT = 9  # the decision never connects; the end-to-end test fills in a real listener


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> AttackWorkspace:
    return attack_workspace(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def harmless_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return harmless_workspace(tmp_path_factory.mktemp("harmless") / "project")


def judged(command: str, root: Path, home: Path) -> Verdict:
    box = Sandbox(root, Availability("bwrap", "test"))
    return decide_command(
        command,
        root=root,
        home=home,
        scanner=box.scanner,
        history=box.repository.secrets,
        path=run_env()["PATH"],
    )


def test_the_corpus_is_large_and_covers_every_class() -> None:
    classes = Counter(attack.klass for attack in ATTACKS)
    assert len(ATTACKS) >= 300
    assert len(HARMLESS) >= 60
    assert len(classes) == 10, classes
    assert min(classes.values()) >= 20, classes
    assert len({attack.command for attack in ATTACKS}) == len(ATTACKS)  # no duplicates


@pytest.mark.parametrize(
    "index", range(len(ATTACKS)), ids=[f"{a.klass[:2]}-{a.command[:40]!r}" for a in ATTACKS]
)
def test_an_attack_is_asked_or_denied(index: int, attacked: AttackWorkspace) -> None:
    attack = ATTACKS[index]
    command = fill(
        attack.command,
        canary=canary_name(index),
        outside=attacked.outside,
        home=attacked.home,
        port=PORT,
    )
    verdict = judged(command, attacked.root, attacked.home)
    assert verdict.decision != ALLOW, f"allowed unasked ({verdict.reason}): {command!r}"
    if attack.expected == MUST_DENY:
        assert verdict.decision == DENY, f"asked, not denied ({verdict.reason}): {command!r}"
    assert verdict.reason


@pytest.mark.parametrize("command", HARMLESS)
def test_a_harmless_command_is_not_asked(command: str, harmless_root: Path) -> None:
    verdict = judged(command, harmless_root, harmless_root.parent / "home")
    assert verdict.decision == ALLOW, verdict.reason


def test_every_long_option_the_installed_gnu_tools_document_is_known() -> None:
    # An abbreviation is resolved against the spec: a documented option missing from it could
    # be what `--x` means to the program while the spec resolves it to something else.
    import re
    import shutil
    import subprocess

    from lsp_agent.safety.allowlist import _XARGS, SPECS
    from lsp_agent.safety.readers import _SED

    specs = {**SPECS, "sed": _SED, "xargs": _XARGS}
    checked = 0
    for name, spec in sorted(specs.items()):
        if not spec.abbreviations or shutil.which(name) is None:
            continue
        shown = subprocess.run([name, "--help"], capture_output=True, text=True, check=False)
        documented = set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", shown.stdout))
        assert documented <= set(spec.options), (name, sorted(documented - set(spec.options)))
        checked += 1
    assert checked >= 30
