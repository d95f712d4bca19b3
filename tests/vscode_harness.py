"""A real VS Code for end-to-end tests: code-server driven by Playwright and Debian's Chromium.

- `build_vsix()` builds the extension (`editors/vscode`) into a `.vsix`, in a copy of its sources
  under `.cache/vscode-extension/` (so a test never rewrites the developer's `node_modules`),
  cached by a hash of the sources and the lockfile: a second run with no change costs nothing.
- `install_code_server()` runs `scripts/install-code-server.sh` (cached in `.cache/code-server/`).
- `CodeServer` runs one code-server with its own user data, extensions, HOME and XDG dirs, in its
  own process group, and kills the whole group at the end.
- `Workbench` wraps the Playwright page: the command palette, input boxes, the panel, buttons.
- `report_failure` keeps what a failed test leaves behind in `.cache/vscode-failures/<test>/`:
  code-server's log, every log VS Code wrote (the extension host's, each output channel with the
  extension's and the server's lines) and a screenshot. pytest's temporary folders are shared by
  every run on the machine and only the last three survive.

Every wait is on a condition (a locator, a file, an HTTP answer) with a generous deadline: CI is
a loaded 2-core machine.

Also a command line for scripts/test.sh: `python -m tests.vscode_harness unit` runs the
extension's own Node unit tests (`npm test`) in the same build copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "editors" / "vscode"
CACHE = ROOT / ".cache"
BUILD = CACHE / "vscode-extension"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
# Not copied to the build: what builds produce. Not in the source hash: the screenshots too.
_BUILT = {"node_modules", "out", "dist", ".vscode-test"}
_NOT_HASHED = {"media"}

# What the palette and the rest of the UI need to be quiet and the same on every run.
QUIET_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "workbench.welcomePage.walkthroughs.openOnInstall": False,
    "workbench.colorTheme": "Default Dark Modern",
    "telemetry.telemetryLevel": "off",
    "security.workspace.trust.enabled": False,
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True,
    "update.mode": "none",
    "editor.minimap.enabled": False,
    "editor.stickyScroll.enabled": False,  # no heading pinned over the output in screenshots
    "git.openRepositoryInParentFolders": "never",
    "window.commandCenter": False,
    "chat.commandCenter.enabled": False,
    "files.autoSave": "off",
    "remote.autoForwardPorts": False,
}


class SetupError(RuntimeError):
    """Something the tests need could not be built or installed; the message says what."""


def _run(command: list[str], cwd: Path, what: str, env: Mapping[str, str] | None = None) -> str:
    """Run to the end; on failure raise with the output's tail."""
    done = subprocess.run(
        command,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-60:])
        raise SetupError(f"{what} failed (exit {done.returncode}): {' '.join(command)}\n{tail}")
    return done.stdout


def require_node() -> None:
    """Node 20 and npm must be there: the VS Code tests fail (never skip) without them."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise SetupError(
            f"{' and '.join(missing)} not found: the VS Code tests need Node 20 and npm "
            "(Debian: apt-get install nodejs npm, or Node 20 from nodejs.org)"
        )


def _sources(hashed: bool = False) -> list[Path]:
    """The extension's files (relative), without build output; `hashed`: the ones that count."""
    skip = _BUILT | _NOT_HASHED if hashed else _BUILT
    files = []
    for path in sorted(EXTENSION.rglob("*")):
        rel = path.relative_to(EXTENSION)
        if rel.parts[0] in skip or path.suffix == ".vsix" or not path.is_file():
            continue
        files.append(rel)
    return files


def _digest(paths: list[Path], base: Path, *extra: str) -> str:
    digest = hashlib.sha256()
    for part in extra:
        digest.update(part.encode() + b"\0")
    for rel in paths:
        digest.update(str(rel).encode() + b"\0")
        digest.update((base / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _node_version() -> str:
    return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()


def prepare_extension() -> Path:
    """A copy of the extension's sources with `node_modules` installed by `npm ci`."""
    require_node()
    if not (EXTENSION / "package-lock.json").is_file():
        raise SetupError(f"{EXTENSION}/package-lock.json is missing: the build needs it (npm ci)")
    tree = BUILD / "tree"
    tree.mkdir(parents=True, exist_ok=True)
    for entry in tree.iterdir():  # the previous copy, except the installed modules
        if entry.name == "node_modules":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for rel in _sources():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXTENSION / rel, tree / rel)
    lock = _digest([Path("package-lock.json")], EXTENSION, _node_version())
    stamp = tree / "node_modules" / ".lsp-agent-lock"
    if not (stamp.is_file() and stamp.read_text() == lock):
        _run(["npm", "ci", "--no-audit", "--no-fund"], tree, "npm ci (editors/vscode)")
        stamp.write_text(lock)
    return tree


def build_vsix() -> Path:
    """The packaged extension, rebuilt only when its sources or lockfile changed."""
    require_node()
    key = _digest(_sources(hashed=True), EXTENSION, _node_version())
    vsix = BUILD / f"lsp-agent-{key}.vsix"
    if vsix.is_file():
        return vsix
    tree = prepare_extension()
    package = json.loads((tree / "package.json").read_text())
    scripts = package.get("scripts", {})
    if "vscode:prepublish" not in scripts:  # else vsce runs the build itself
        _run(["npm", "run", "build"], tree, "npm run build (editors/vscode)")
    partial = BUILD / f"lsp-agent-{key}.vsix.partial"
    # The extension's own `package` script carries its vsce options; else plain `vsce package`.
    if "package" in scripts:
        command = ["npm", "run", "package", "--", "--out", str(partial)]
    else:
        command = ["npx", "--no-install", "vsce", "package", "--out", str(partial)]
    _run(command, tree, "packaging the extension (editors/vscode)")
    for old in BUILD.glob("lsp-agent-*.vsix"):
        old.unlink()
    partial.rename(vsix)
    return vsix


def install_code_server() -> Path:
    """code-server's entry script (`node <it> …`), installed by scripts/install-code-server.sh."""
    require_node()
    script = ROOT / "scripts" / "install-code-server.sh"
    out = _run(["bash", str(script)], ROOT, "installing code-server")
    entry = Path(out.strip().splitlines()[-1])
    if not entry.is_file():
        raise SetupError(f"install-code-server.sh named {entry}, which does not exist")
    if not CHROMIUM.exists():
        raise SetupError(f"{CHROMIUM} is missing (apt-get install chromium)")
    return entry


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll `condition()` until it returns something truthy; raise naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def machine_settings() -> frozenset[str]:
    """The extension's settings of machine scope (package.json), which VS Code reads from the
    Remote settings in a remote window such as code-server's."""
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    sections = manifest["contributes"]["configuration"]
    sections = sections if isinstance(sections, list) else [sections]
    return frozenset(
        key
        for section in sections
        for key, schema in section["properties"].items()
        if schema.get("scope") in ("machine", "machine-overridable")
    )


STRAY_GRACE_S = 10.0
"""How long a process that left code-server's group has to end on its own once code-server
is gone (a hang guard: the wait is on the process's exit)."""


def _ends_within(pid: int, within: float) -> bool:
    """Whether `pid` ends (or is a zombie already) within `within` seconds, waiting on its pidfd,
    which becomes readable when it exits."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([handle], [], [], within)
        return bool(ready)
    finally:
        os.close(handle)


class CodeServer:
    """One code-server, isolated in `home` (user data, extensions, HOME, XDG dirs)."""

    def __init__(self, entry: Path, home: Path) -> None:
        self.entry = entry
        self.home = home
        self.user_data = home / "user-data"
        self.extensions = home / "extensions"
        self.log = home / "code-server.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        for folder in (self.user_data / "User", self.extensions, home / "xdg"):
            folder.mkdir(parents=True, exist_ok=True)
        # Unix sockets (code-server's, VS Code's IPC, Chromium's) need paths under 108 bytes:
        # they go to a short folder of their own, not under pytest's long tmp paths.
        self.sockets = Path(tempfile.mkdtemp(prefix="vsc-", dir="/tmp"))
        for name in ("run", "tmp"):
            (self.sockets / name).mkdir(mode=0o700)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The machine's environment, less anything that configures the agent or an editor."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("LSP_AGENT_", "OPENAI_", "ANTHROPIC_", "XDG_", "VSCODE_"))
            and not key.startswith(("CODE_SERVER", "PYTEST_", "ELECTRON_"))
            and key not in ("CONTEXT_WINDOW", "PASSWORD", "HASHED_PASSWORD", "CS_DISABLE_")
        }
        xdg = self.home / "xdg"
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(xdg / "config"),
            XDG_DATA_HOME=str(xdg / "data"),
            XDG_STATE_HOME=str(xdg / "state"),
            XDG_CACHE_HOME=str(xdg / "cache"),
            XDG_RUNTIME_DIR=str(self.sockets / "run"),
            TMPDIR=str(self.sockets / "tmp"),
        )
        env.update(extra or {})
        return env

    def _base_args(self) -> list[str]:
        return [
            "node",
            str(self.entry),
            "--user-data-dir",
            str(self.user_data),
            "--extensions-dir",
            str(self.extensions),
        ]

    def settings(self, values: Mapping[str, Any]) -> None:
        """Write the settings as a code-server user keeps them: the extension's machine settings
        in the Remote settings (Machine/settings.json), the rest in the User settings.json
        (merged over QUIET_SETTINGS).

        A code-server window is a remote window, and VS Code applies a machine setting there
        from the Remote settings only: one left in the User file is dropped once the extension's
        settings are registered, so whether the extension saw it depended on which came first
        (a window reload on a loaded machine lost `lspAgent.server.command` that way)."""
        machine = machine_settings()
        remote = {key: value for key, value in values.items() if key in machine}
        user = {key: value for key, value in values.items() if key not in machine}
        for folder, content in (("User", {**QUIET_SETTINGS, **user}), ("Machine", remote)):
            (self.user_data / folder).mkdir(parents=True, exist_ok=True)
            path = self.user_data / folder / "settings.json"
            path.write_text(json.dumps(content, indent=2), encoding="utf-8")

    def install_extension(self, vsix: Path) -> None:
        out = _run(
            [*self._base_args(), "--install-extension", str(vsix), "--force"],
            self.home,
            f"code-server --install-extension {vsix.name}",
            self.env(),
        )
        if "successfully installed" not in out.lower():
            raise SetupError(f"installing {vsix.name} said:\n{out}")

    def start(self, extra_env: Mapping[str, str] | None = None, timeout: float = 120) -> None:
        self.port = free_port()
        command = [
            *self._base_args(),
            "--auth",
            "none",
            "--bind-addr",
            f"127.0.0.1:{self.port}",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            "--ignore-last-opened",
            "--session-socket",
            str(self.sockets / "session.sock"),
            "--log",
            "debug",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.home,
                env=self.env(extra_env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills every child
            )
        wait_until(self._healthy, timeout, f"code-server to answer on {self.url}", interval=0.5)

    def _healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise SetupError(f"code-server exited ({self.process.returncode}):\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> list[str]:
        """Kill code-server's whole process group (the extension host, the LSP server, …).

        Returns the command lines of processes that had left the group (found by the HOME this
        code-server gave them) and had to be killed one by one: none is expected."""
        if self.process is None:
            shutil.rmtree(self.sockets, ignore_errors=True)
            return []
        group = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=15)
        self.process = None
        # A process that left the group on purpose (an MCP server runs in a session of its own)
        # ends once its parent's pipes close: only one still alive after that had to be killed.
        strays = [stray for stray in self._strays() if not _ends_within(stray[0], STRAY_GRACE_S)]
        for pid, _ in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.sockets, ignore_errors=True)
        return [command for _, command in strays]

    def _strays(self) -> list[tuple[int, str]]:
        """Live processes whose environment has this code-server's HOME."""
        marker = f"HOME={self.home}".encode() + b"\0"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker not in (entry / "environ").read_bytes() + b"\0":
                    continue
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if state != "Z":
                found.append((int(entry.name), command.strip()))
        return found

    def output_channel(self, name: str) -> str:
        """The text of the output channel `name` as the extension wrote it ('' before it exists).

        VS Code backs each output channel with a file in the extension host's log folder
        (`exthost*/output_logging_*/<n>-<name>.log`): what the extension appended, byte for byte,
        whatever the panel shows or scrolls."""
        for path in sorted((self.user_data / "logs").glob("*/exthost*/output_logging_*/*.log")):
            if path.name.split("-", 1)[-1] == f"{name}.log":
                return path.read_text(encoding="utf-8", errors="replace")
        return ""

    def log_tail(self, lines: int = 50) -> str:
        """The end of code-server's log and of the logs VS Code wrote (extension host, output
        channels), less the built-in Git extensions' chatter."""
        parts = []
        logs = sorted((self.user_data / "logs").rglob("*.log"))
        files = [self.log, *(p for p in logs if not p.parent.name.startswith("vscode.git"))]
        for path in files:
            try:
                text = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if text:
                parts.append(f"--- {path.relative_to(self.home)}\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)


class Workbench:
    """The VS Code UI in a Playwright page; `timeout` (ms) is every wait's deadline."""

    def __init__(self, page: Any, timeout: float = 60_000) -> None:
        self.page = page
        self.timeout = timeout
        page.set_default_timeout(timeout)

    def open(self, url: str, folder: Path) -> None:
        self.page.goto(f"{url}/?folder={folder}")
        self.page.locator(".monaco-workbench .part.statusbar").wait_for(state="visible")
        self.page.locator(".explorer-folders-view, .explorer-viewlet").first.wait_for(
            state="visible"
        )

    @property
    def quick_input(self) -> Any:
        return self.page.locator(".quick-input-widget")

    def run_command(self, title: str) -> None:
        """Open the palette with F1, type the command's title and run it with Enter."""
        self.page.locator(".monaco-workbench").click(position={"x": 640, "y": 300})
        self.page.keyboard.press("F1")
        box = self.quick_input.locator("input.input")
        box.wait_for(state="visible")
        box.fill(">" + title)
        # Not simply Enter: a recently used command may rank above the exact match.
        label = self.page.locator(".label-name", has_text=re.compile(f"^{re.escape(title)}$"))
        row = self.quick_input.locator(".monaco-list-row").filter(has=label).first
        row.click()
        # The palette is done when its widget hides, or shows something else (the command's own
        # input box reuses the same widget at once): its input no longer holds the `>` query.
        self.page.wait_for_function(
            """() => {
                const widget = document.querySelector('.quick-input-widget');
                const input = widget && widget.querySelector('input.input');
                return !widget || widget.style.display === 'none' || !input
                    || !input.value.startsWith('>');
            }"""
        )

    def answer_input(self, text: str, title: str | None = None) -> None:
        """Type `text` into the open input box (its title, when given, must match) and Enter."""
        widget = self.quick_input
        if title is not None:
            widget.locator(".quick-input-title", has_text=title).wait_for(state="visible")
        box = widget.locator("input.input")
        box.wait_for(state="visible")
        box.fill(text)
        self.page.keyboard.press("Enter")
        widget.wait_for(state="hidden")

    def notification(self, text: str) -> Any:
        """The notification toast whose message contains `text`."""
        return self.page.locator(".notifications-toasts .notification-toast").filter(has_text=text)

    def notification_button(self, text: str, button: str) -> Any:
        """A button of the notification toast whose message contains `text`."""
        name = re.compile(f"^{re.escape(button)}$")
        return self.notification(text).locator(".monaco-button", has_text=name)

    def status_item(self, text: str) -> Any:
        """A status bar item whose text contains `text`."""
        return self.page.locator(".part.statusbar .statusbar-item", has_text=text)

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path


FAILURES = CACHE / "vscode-failures"
"""Where a failed test's logs and screenshot are kept: pytest's own temporary folders are
shared with every other run on the machine and only the last few are kept."""


def keep_logs(server: CodeServer, name: str, also: Mapping[str, Path] | None = None) -> Path:
    """Copy what VS Code and code-server logged (the extension host's log, every output channel
    with the extension's and the server's lines) to `FAILURES/<name>/`, and the folders of
    `also` under their names (the language server's state: its transcripts and log); its path."""
    kept = FAILURES / re.sub(r"[^\w.-]+", "_", name)[:150]
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    with contextlib.suppress(OSError):
        shutil.copy2(server.log, kept / server.log.name)
    logs = server.user_data / "logs"
    if logs.is_dir():
        shutil.copytree(logs, kept / "logs", dirs_exist_ok=True)
    for label, folder in (also or {}).items():
        if folder.is_dir():
            with contextlib.suppress(OSError, shutil.Error):
                shutil.copytree(folder, kept / label, dirs_exist_ok=True, symlinks=True)
    return kept


def report_failure(
    server: CodeServer,
    workbench: Workbench | None,
    folder: Path,
    name: str | None = None,
    also: Mapping[str, Path] | None = None,
) -> None:
    """Save a screenshot, keep the logs (under `FAILURES` when the test is named, else in
    `folder`) and print the tail of code-server's logs."""
    kept = keep_logs(server, name, also) if name is not None else folder
    print(f"\n==== code-server logs, kept whole in {kept}")
    print(server.log_tail())
    if workbench is not None:
        with contextlib.suppress(Exception):
            shot = workbench.screenshot(kept / "failure.png")
            print(f"==== screenshot of the failure: {shot}")


@contextlib.contextmanager
def diagnostics(
    server: CodeServer, workbench: Workbench | None, folder: Path, name: str | None = None
) -> Iterator[None]:
    """On any failure inside: `report_failure`, then the failure goes on."""
    try:
        yield
    except BaseException:
        report_failure(server, workbench, folder, name)
        raise


def main(argv: list[str]) -> int:
    """`unit`: the extension's Node unit tests (npm test) in the build copy."""
    if argv != ["unit"]:
        print("usage: python -m tests.vscode_harness unit", file=sys.stderr)
        return 2
    try:
        tree = prepare_extension()
    except SetupError as error:
        print(error, file=sys.stderr)
        return 1
    env = dict(os.environ)  # the dot reporter: a line of dots, and the details of failures
    env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + " --test-reporter=dot").strip()
    return subprocess.run(["npm", "test"], cwd=tree, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
