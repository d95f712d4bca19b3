"""What the walls guard in a workspace: paths no command may write, and paths whose content is
secret.

Protected (read-only inside the sandbox; the edit tools ask for them when no preview does):

- at the workspace root, whether they exist or not: `PROTECTED_DIRS` and `PROTECTED_FILES`
  (git's folder and config, editor tasks, shell rc files, package-manager config that runs code
  or holds tokens, the virtualenv folders editors start on their own);
- found by looking (`guards`): the `.git` of every nested repository and of every submodule (a
  gitlink of the index, even one not checked out), every virtualenv (a folder with `pyvenv.cfg`
  or `conda-meta`), the git folder a `.git` file points to, the folder `core.hooksPath` names
  (husky's `.husky/`) and the files `include.path` names.

Secret (commands that read them are asked; recursive searches that would are asked): names in
`is_secret_name` — `.env*`, `.git` (its config carries remote URLs with tokens) and token files.

The walk is cached per folder on the folder's modification time, so that a second look at an
unchanged workspace stats its folders and reads nothing else.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lsp_agent.safety.reading import CONFIG_BYTES, Refused, read_regular, read_small

PROTECTED_DIRS = (".git", ".vscode", ".idea", ".venv", "venv")
"""Folders of the workspace root no command may write: git's hooks and config, editor tasks and
launch configurations, and the virtualenvs an editor starts on its own (a `.pth` file in one runs
at its next start)."""
PROTECTED_FILES = (
    ".gitmodules",
    ".gitconfig",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".pypirc",
    ".netrc",
    ".git-credentials",
)
"""Files of the workspace root that something runs or trusts later (shells, git, direnv, npm,
yarn, pip): read-only inside."""

RUN_LATER_AT_ROOT = (
    ".nvim.lua",
    ".nvimrc",
    ".exrc",
    ".lazy.lua",
    ".helix/",
    ".zed/",
    ".github/workflows/",
    ".github/actions/",
    ".gitlab-ci.yml",
    ".circleci/",
    ".pre-commit-config.yaml",
    ".husky/",
    "lefthook.yml",
    ".lefthook.yml",
    ".devcontainer/",
    ".devcontainer.json",
    "mise.toml",
    ".mise.toml",
)
"""Paths at the workspace root that an editor, a shell hook, CI or a git hook manager runs or
loads as code later (a name ending in `/` is a folder, with everything in it): edits of them
are asked when no preview shows them (mode `auto`, `--yes`), like `.vscode/`."""
RUN_LATER_ANYWHERE = (
    ".dir-locals.el",
    ".dir-locals-2.el",
    "conftest.py",
    "Makefile",
    "makefile",
    "GNUmakefile",
    ".cargo/",
    "sitecustomize.py",
    "usercustomize.py",
)
"""Names that run as code at any depth of the workspace (Emacs reads `.dir-locals.el` of every
parent folder, pytest every `conftest.py`, make any `Makefile` it is pointed at, cargo every
`.cargo/config.toml` above the folder it builds, Python a `sitecustomize.py` on its path)."""

SECRET_NAMES = frozenset(
    {".git", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".yarnrc.yml", ".docker",
     ".aws", ".ssh", ".gnupg", ".kube", ".pgpass"}
)  # fmt: skip
"""Names whose content may hold credentials (besides every name starting with `.env`)."""

IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})
"""Files whose `!` lines can make ripgrep search hidden files."""
CONFIG_FILES = frozenset(
    {"pyproject.toml", "ruff.toml", ".ruff.toml", "pytest.ini", ".pytest.ini", "tox.ini",
     "setup.cfg"}
)  # fmt: skip
"""Configuration files that change what a read-only tool does (ruff's fix, pytest's addopts)."""
SKIPPED_FOLDERS = frozenset({"node_modules"})
"""Folders the search for nested repositories and virtualenvs does not enter (package managers
strip `.git` from what they install there; editors do not look there either)."""

MAX_INDEX_BYTES = 1024 * 1024 * 1024
"""A git index larger than this is not read for gitlinks (a 200,000-file index is ~30 MB)."""
MAX_FOLDERS = 200_000
"""Folders a workspace walk visits at most; past it the walk says it is incomplete."""


def is_secret_name(name: str) -> bool:
    """Whether a file or folder called `name` may hold secrets (case-insensitive)."""
    folded = name.casefold()
    return folded.startswith(".env") or folded in SECRET_NAMES


def off_limits(part: str) -> str | None:
    """The protected name a path component falls under for the file tools — `.git`, `.venv`,
    `.env` (any `.env*`) or another credential file's name — or None (case-insensitive: on
    macOS and Windows `.GIT` is the same directory as `.git`)."""
    folded = part.casefold()
    if folded in (".git", ".venv"):
        return folded
    if folded.startswith(".env"):
        return ".env"
    return folded if folded in SECRET_NAMES else None


def secret_part(parts: Iterable[str]) -> str | None:
    """The first component of a path that names a secret, or None."""
    for part in parts:
        if is_secret_name(part):
            return part
    return None


def edit_protection(root: Path, path: Path) -> str | None:
    """Why writing `path` (absolute, inside `root`) must be confirmed by the user: it is a path
    the sandbox keeps read-only for commands, because something runs or trusts it later.
    None when it is not protected."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    folders = {name.casefold() for name in PROTECTED_DIRS}
    files = {name.casefold() for name in (*PROTECTED_DIRS, *PROTECTED_FILES)}
    for part in parts[:-1]:
        if part.casefold() in folders:
            return f"{part}/ is protected (something runs what it holds later)"
    if parts and parts[-1].casefold() in files:
        return f"{parts[-1]} is protected (something runs or trusts it later)"
    later = _runs_later(parts)
    if later is not None:
        return f"{later} is run or loaded as code later (by an editor, CI or a build tool)"
    for parent in path.parents:
        if parent == root or not parent.is_relative_to(root):
            break
        if _is_venv(parent):
            return f"{parent.relative_to(root)} is a virtualenv (its files run at its next start)"
    for guarded in git_config_paths(root):
        if path == guarded or path.is_relative_to(guarded):
            return f"{guarded.relative_to(root)} is run by git (core.hooksPath or include.path)"
    return None


def _runs_later(parts: tuple[str, ...]) -> str | None:
    """The `RUN_LATER_*` entry the path `parts` (relative to the root) falls under, or None
    (case-insensitive, as on macOS and Windows)."""
    folded = tuple(part.casefold() for part in parts)
    relative = "/".join(folded)
    for entry in RUN_LATER_AT_ROOT:
        key = entry.casefold()
        if (key.endswith("/") and relative.startswith(key)) or relative == key:
            return entry
    for index, part in enumerate(folded):
        for entry in RUN_LATER_ANYWHERE:
            key = entry.casefold()
            if key.endswith("/") and part == key[:-1] and index < len(parts) - 1:
                return entry
            if part == key and index == len(parts) - 1:
                return entry
    return None


@dataclass(frozen=True)
class Guard:
    """One path to keep read-only while a command runs."""

    path: Path
    folder: bool
    """Made as an empty folder when it does not exist (a file placeholder is a folder too)."""
    must_exist: bool = False
    """Only guarded when it exists (found paths); else a placeholder is made."""


@dataclass
class ScannedFolder:
    """What one folder holds that the walls care about (cached on its mtime)."""

    mtime: int
    subfolders: tuple[str, ...]
    secrets: tuple[str, ...]
    git: str | None
    """`dir` or `file` when the folder holds a `.git`, else None."""
    venv: bool
    ignore_files: tuple[str, ...]
    symlinks: tuple[str, ...]
    configs: tuple[str, ...]
    """Names of `CONFIG_FILES` it holds."""


@dataclass
class WalkResult:
    """What a walk of the workspace found."""

    complete: bool = True
    repositories: list[Path] = field(default_factory=list)
    """Folders holding a `.git` (file or folder), the workspace itself excluded."""
    venvs: list[Path] = field(default_factory=list)


class Scanner:
    """Walks a workspace's folders, remembering each folder until its mtime changes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        """The workspace."""
        self._folders: dict[str, ScannedFolder] = {}
        """Each folder seen (by path), with what it held at its recorded mtime."""
        self._gitlinks: tuple[object, list[Path]] | None = None
        """The submodule folders, with the state of the index they were read from."""
        self._lock = threading.Lock()

    def gitlinks(self) -> list[Path]:
        """`gitlinks(root)`, read again only when the index or `.gitmodules` changed."""
        found = git_dir(self.root)
        key: list[object] = [found]
        if found is not None:
            for path in (found[1] / "index", found[0] / ".gitmodules"):
                with contextlib.suppress(OSError):
                    info = path.stat()
                    key.append((info.st_mtime_ns, info.st_size, info.st_ino))
        with self._lock:
            if self._gitlinks is not None and self._gitlinks[0] == key:
                return self._gitlinks[1]
        links = gitlinks(self.root)
        with self._lock:
            self._gitlinks = (key, links)
        return links

    def folder(self, path: str) -> ScannedFolder | None:
        """The cached view of one folder (None when it is not a readable real folder)."""
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        with self._lock:
            cached = self._folders.get(path)
            if cached is not None and cached.mtime == info.st_mtime_ns:
                return cached
        seen = _read_folder(path, info.st_mtime_ns)
        if seen is not None:
            with self._lock:
                self._folders[path] = seen
        return seen

    def walk(
        self,
        top: Path,
        visit: Callable[[str, ScannedFolder], bool],
        skip: frozenset[str] = frozenset(),
    ) -> bool:
        """Call `visit` on every folder under `top` (itself included; paths as strings), never
        through a symlink, never into `.git`, a virtualenv below `top` or a folder named in
        `skip`, until `visit` returns True.

        Returns False when the walk stopped at `MAX_FOLDERS` without seeing everything.
        """
        stack = [str(top)]
        visited = 0
        while stack:
            path = stack.pop()
            seen = self.folder(path)
            if seen is None:
                continue
            visited += 1
            if visited > MAX_FOLDERS:
                return False
            if visit(path, seen):
                return True
            if seen.venv and visited > 1:
                continue
            stack.extend(
                os.path.join(path, name)
                for name in seen.subfolders
                if name != ".git" and name not in skip
            )
        return True

    def find(self) -> WalkResult:
        """Nested repositories and virtualenvs of the workspace."""
        result = WalkResult()
        top = str(self.root)

        def visit(path: str, seen: ScannedFolder) -> bool:
            if path != top:
                if seen.git is not None:
                    result.repositories.append(Path(path))
                if seen.venv:
                    result.venvs.append(Path(path))
            return False

        result.complete = self.walk(self.root, visit, SKIPPED_FOLDERS)
        return result


def guards(root: Path, scanner: Scanner) -> list[Guard]:
    """Every path of the workspace to keep read-only while a command runs."""
    found = [Guard(root / name, True) for name in PROTECTED_DIRS]
    found += [Guard(root / name, False) for name in PROTECTED_FILES]
    walked = scanner.find()
    for repository in [root, *walked.repositories]:
        dot_git = repository / ".git"
        if repository != root:
            found.append(Guard(dot_git, dot_git.is_dir(), must_exist=True))
        if dot_git.is_file() and not dot_git.is_symlink():
            target = gitfile_target(dot_git)
            if target is not None and target != root and target.is_relative_to(root):
                found.append(Guard(target, True, must_exist=True))
    found += [Guard(venv, True, must_exist=True) for venv in walked.venvs]
    found += [Guard(link / ".git", True) for link in scanner.gitlinks()]
    for path in git_config_paths(root):
        found.append(Guard(path, not path.is_file()))
    unique: dict[Path, Guard] = {}
    for guard in found:
        unique.setdefault(guard.path, guard)
    return sorted(unique.values(), key=lambda guard: (len(guard.path.parts), str(guard.path)))


def _read_folder(path: str, mtime: int) -> ScannedFolder | None:
    subfolders: list[str] = []
    secrets: list[str] = []
    ignore_files: list[str] = []
    symlinks: list[str] = []
    configs: list[str] = []
    git: str | None = None
    venv = False
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                try:
                    is_link = entry.is_symlink()
                    is_dir = not is_link and entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_link:
                    symlinks.append(name)
                if is_dir:
                    subfolders.append(name)
                if is_secret_name(name):
                    secrets.append(name)
                if name == ".git":
                    git = "dir" if is_dir else "file"
                if name in ("pyvenv.cfg", "conda-meta"):
                    venv = True
                if name in IGNORE_FILES and not is_dir:
                    ignore_files.append(name)
                if name in CONFIG_FILES and not is_dir:
                    configs.append(name)
    except OSError:
        return None
    return ScannedFolder(
        mtime,
        tuple(sorted(subfolders)),
        tuple(sorted(secrets)),
        git,
        venv,
        tuple(sorted(ignore_files)),
        tuple(sorted(symlinks)),
        tuple(sorted(configs)),
    )


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file() or (path / "conda-meta").is_dir()


def whitelists(path: Path) -> bool:
    """Whether the ignore file at `path` has a `!` line (which can make hidden files searched);
    True too when it cannot be read as a plain file (a FIFO, a device, too large), which
    ripgrep might still read."""
    try:
        found = read_regular(path, CONFIG_BYTES)
    except FileNotFoundError:
        return False
    except (OSError, Refused):
        return True
    if found.cut:
        return True
    return any(
        line.lstrip().startswith("!")
        for line in found.data.decode("utf-8", errors="replace").splitlines()
    )


# Git facts read from files (no git process): where the git folder is, what the config says.


def git_dir(root: Path) -> tuple[Path, Path] | None:
    """The repository the folder `root` belongs to: `(top, git folder)`, or None."""
    for top in (root, *root.parents):
        dot_git = top / ".git"
        if dot_git.is_dir():
            return top, dot_git
        if dot_git.is_file():
            target = gitfile_target(dot_git)
            return (top, target) if target is not None else None
    return None


def gitfile_target(dot_git: Path) -> Path | None:
    """The git folder a `.git` file points to (`gitdir: …`), resolved."""
    data = read_small(dot_git, 4096)
    lines = data.decode("utf-8", errors="replace").splitlines() if data is not None else []
    if not lines:
        return None
    first = lines[0]
    if not first.startswith("gitdir:"):
        return None
    try:
        return (dot_git.parent / first.removeprefix("gitdir:").strip()).resolve()
    except (OSError, RuntimeError):
        return None


def common_dir(git_folder: Path) -> Path:
    """The folder holding a worktree's shared config and refs (the git folder itself else)."""
    data = read_small(git_folder / "commondir", 4096)
    lines = data.decode("utf-8", errors="replace").splitlines() if data is not None else []
    if lines and lines[0].strip():
        with contextlib.suppress(OSError, RuntimeError):
            return (git_folder / lines[0].strip()).resolve()
    return git_folder


_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")


def config_values(path: Path, wanted: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """`(section, key, value)` of a git config file for the wanted `(section, key)` pairs
    (lower case; a subsection such as `includeIf "…"` counts as its section)."""
    found: list[tuple[str, str, str]] = []
    data = read_small(path, CONFIG_BYTES)
    if data is None:
        return found
    text = data.decode("utf-8", errors="replace")
    section = ""
    for line in text.splitlines():
        match = _SECTION.match(line)
        if match:
            section = match.group(1).lower()
            line = match.group(3)
            if not line.strip():
                continue
        key_match = _KEY.match(line)
        if key_match is None:
            continue
        key = key_match.group(1).lower()
        if (section, key) in wanted:
            found.append((section, key, _config_value(key_match.group(2) or "")))
    return found


def _config_value(raw: str) -> str:
    value: list[str] = []
    quoted = False
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == '"':
            quoted = not quoted
        elif char == "\\" and index + 1 < len(raw):
            index += 1
            value.append({"n": "\n", "t": "\t"}.get(raw[index], raw[index]))
        elif char in "#;" and not quoted:
            break
        else:
            value.append(char)
        index += 1
    return "".join(value).strip()


def git_config_paths(root: Path) -> list[Path]:
    """Paths inside the workspace that git runs or reads as config: the `core.hooksPath`
    folder (its parent too for husky's `.husky/_`) and `include.path` files."""
    found = git_dir(root)
    if found is None:
        return []
    top, folder = found
    shared = common_dir(folder)
    home = Path(os.path.expanduser("~"))
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    configs = [
        Path("/etc/gitconfig"),
        home / ".gitconfig",
        Path(xdg) / "git" / "config",
        shared / "config",
        folder / "config.worktree",
    ]
    paths: list[Path] = []
    wanted = {("core", "hookspath"), ("include", "path"), ("includeif", "path")}
    for config in configs:
        for section, _, value in config_values(config, wanted):
            if not value:
                continue
            base = top if section == "core" else config.parent
            target = Path(os.path.expanduser(value))
            target = target if target.is_absolute() else base / target
            with contextlib.suppress(OSError, RuntimeError):
                target = target.resolve()
            if target == root or not target.is_relative_to(root):
                continue
            paths.append(target)
            if section == "core" and target.name == "_" and target.parent != root:
                paths.append(target.parent)  # husky: .husky/_/h runs the scripts of .husky/
    return sorted(set(paths))


def gitlinks(root: Path) -> list[Path]:
    """Submodule folders of the workspace's repository (gitlinks in the index, and the paths
    `.gitmodules` names), inside the workspace."""
    found = git_dir(root)
    if found is None:
        return []
    top, folder = found
    paths = {top / name for name in _index_gitlinks(folder / "index", _hash_size(folder))}
    for _, _, value in config_values(top / ".gitmodules", {("submodule", "path")}):
        if value:
            paths.add(top / value)
    inside: list[Path] = []
    for path in sorted(paths):
        normal = Path(os.path.normpath(path))
        if normal != root and normal.is_relative_to(root):
            inside.append(normal)
    return inside


def _hash_size(folder: Path) -> int:
    for _, _, value in config_values(
        common_dir(folder) / "config", {("extensions", "objectformat")}
    ):
        if value.lower() == "sha256":
            return 32
    return 20


def _index_gitlinks(index: Path, hash_size: int) -> list[str]:
    """Paths of the gitlink entries (mode 160000) of a git index file (versions 2 to 4)."""
    data = read_small(index, MAX_INDEX_BYTES)
    if data is None:
        return []
    if len(data) < 12 or data[:4] != b"DIRC":
        return []
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return []
    offset = 12
    previous = b""
    links: list[str] = []
    fixed = 40 + hash_size + 2  # ten 32-bit fields, the hash, the flags
    for _ in range(count):
        start = offset
        if offset + fixed > len(data):
            break
        mode = int.from_bytes(data[offset + 24 : offset + 28], "big")
        flags = int.from_bytes(data[offset + fixed - 2 : offset + fixed], "big")
        offset += fixed
        if version >= 3 and flags & 0x4000:
            offset += 2
        if version == 4:
            strip, offset = _varint(data, offset)
            end = data.find(b"\0", offset)
            if end < 0:
                break
            name = previous[: len(previous) - strip] + data[offset:end]
            offset = end + 1
            previous = name
        else:
            end = data.find(b"\0", offset)
            if end < 0:
                break
            name = data[offset:end]
            offset = start + ((end - start + 8) // 8) * 8
        if mode == 0o160000:
            links.append(name.decode("utf-8", "surrogateescape"))
    return links


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """Git's offset varint (each continuation adds one before shifting)."""
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
