"""`lsp-agent doctor --json`: the same checks as `doctor`, for editors' health checks to read.

Run as a user's editor runs it: a subprocess with the settings in its environment, against the
scripted model on loopback or an address where nothing listens.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.editor import server_env
from tests.fake_model import ScriptedModel


def doctor(tmp_path: Path, *args: str, **settings: str) -> tuple[int, Any, str]:
    home = tmp_path / "home"
    state = tmp_path / "state"
    home.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "lsp_agent", "doctor", *args],
        env={**server_env(state, home), **settings},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def by_name(document: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {check["name"]: check for check in document["checks"]}


def test_a_served_model_gives_ok_checks_and_the_config_with_its_sources(
    tmp_path: Path, model: ScriptedModel
) -> None:
    code, out, err = doctor(
        tmp_path, "--json", LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model"
    )

    assert code == 0, err
    document = json.loads(out)
    checks = by_name(document)
    assert checks["endpoint"]["status"] == "ok"
    assert model.base_url in checks["endpoint"]["detail"]
    assert checks["model"] == {"name": "model", "status": "ok", "detail": "test-model"}
    assert {check["status"] for check in document["checks"]} <= {"ok", "bad", "info"}
    assert {"python", "lsp-agent", "git", "ripgrep", "sandbox"} <= checks.keys()
    assert document["config"]["model"] == {"value": "test-model", "source": "env:LSP_AGENT_MODEL"}
    assert document["version"] == checks["lsp-agent"]["detail"]


def test_an_unreachable_endpoint_is_bad_in_json_as_in_text(
    tmp_path: Path, unused_port: int
) -> None:
    unreachable = f"http://127.0.0.1:{unused_port}/v1"
    settings = {"LSP_AGENT_BASE_URL": unreachable, "LSP_AGENT_MODEL": "test-model"}

    code, out, _ = doctor(tmp_path, "--json", **settings)
    text_code, text, _ = doctor(tmp_path, **settings)

    endpoint = by_name(json.loads(out))["endpoint"]
    assert endpoint["status"] == "bad"
    assert unreachable in endpoint["detail"]
    assert code == text_code == 1
    assert f"BAD  endpoint   {endpoint['detail']}" in text  # the same probe, the same words


def test_the_api_key_stays_masked_in_json(tmp_path: Path) -> None:
    secret = "sk-doctor-json-secret-42"
    with ScriptedModel(api_key=secret) as model:
        code, out, err = doctor(
            tmp_path,
            "--json",
            LSP_AGENT_BASE_URL=model.base_url,
            LSP_AGENT_MODEL="test-model",
            LSP_AGENT_API_KEY=secret,
        )

    assert code == 0, out  # the endpoint checks the key: it arrived
    assert secret not in out
    assert secret not in err
    assert json.loads(out)["config"]["apiKey"]["value"] == "set (from env:LSP_AGENT_API_KEY)"


@pytest.mark.parametrize(("hidden", "kind"), [(False, "bwrap"), (True, "landlock")])
def test_doctor_says_which_wall_is_in_force_and_what_it_does_not_stop(
    tmp_path: Path, model: ScriptedModel, hidden: bool, kind: str
) -> None:
    # Hidden: a machine where the README's install finds no bubblewrap (LSP_AGENT_BWRAP empty).
    extra = {"LSP_AGENT_BWRAP": ""} if hidden else {}
    code, out, err = doctor(
        tmp_path, "--json", LSP_AGENT_BASE_URL=model.base_url, LSP_AGENT_MODEL="test-model", **extra
    )

    assert code == 0, err
    checks = by_name(json.loads(out))
    if not checks["sandbox"]["detail"].startswith(kind):
        pytest.skip(f"no {kind} wall on this machine: {checks['sandbox']['detail']}")
    assert checks["sandbox"]["status"] == "ok"
    assert "reads" in checks["not stopped"]["detail"]
    if hidden:
        assert "no private /tmp" in checks["not stopped"]["detail"]
