#!/usr/bin/env bash
# Installs everything the tests need into .venv and runs the checks: ruff, mypy, pytest, and the
# VS Code extension's unit tests (npm test).
# Usage: bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests drive for real: bubblewrap (the sandbox), Neovim (the plugin, and its
# built-in client without it), tmux (the terminal the Neovim and Emacs tests type into), setpriv
# (util-linux), with which the sandbox attack suite runs again as an unprivileged user, Emacs
# with Debian's eglot and lsp-mode (the README's Emacs recipes), and luacheck (the plugin's Lua
# linter).
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v nvim >/dev/null 2>&1 || missing+=(neovim)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v luacheck >/dev/null 2>&1 || missing+=(lua-check)
command -v emacs >/dev/null 2>&1 || missing+=(emacs-nox)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # certificates for the HTTPS tests
for package in elpa-eglot elpa-lsp-mode; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "please install: ${missing[*]} (the tests run them)" >&2
    exit 1
  fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
# An editable install leaves the package uncompiled, and where PYTHONDONTWRITEBYTECODE is set
# every server the tests start would compile it again (about 0.2 s each); `pip install .`
# compiles it at install, as users get it.
.venv/bin/python -m compileall -q lsp_agent

echo "== ruff"
.venv/bin/ruff check lsp_agent tests benchmarks scripts
.venv/bin/ruff format --check lsp_agent tests benchmarks scripts
echo "== mypy"
.venv/bin/mypy
echo "== lua (editors/neovim)"
luacheck --quiet --config editors/neovim/.luacheckrc editors/neovim
# stylua's binary comes from the npm registry (PyPI has none); npx caches it in ~/.npm.
npx --yes -p @johnnymorganz/stylua-bin@2.5.2 \
  stylua --config-path editors/neovim/.stylua.toml --check editors/neovim
echo "== pytest"
status=0
# Two workers, each taking whole files (tests/conftest.py: the real editors' files as one).
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
# The suite again on the newest other supported Python this machine has, without the real
# editors (they drive the same server through the same code): what changes between Python
# versions (3.13 stopped raising for symlink loops, say) is found here rather than by a user.
# Only for a whole run: with pytest arguments, the slice runs once.
if [ $# -eq 0 ]; then
  main=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  other=""
  for version in 3.13 3.12 3.11; do
    [ "$version" != "$main" ] || continue
    # On PATH, or installed by pyenv without being its global choice (its shim then refuses).
    for python in "python$version" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python"$version"; do
      if "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        other="$version"
        break 2
      fi
    done
  done
  # The server's tests against the oldest release of each runtime dependency that
  # pyproject.toml declares (scripts/lower_bounds.py): the run above meets the newest ones,
  # this one a lower bound the code no longer works with, before a user's install does.
  echo "== pytest with the oldest declared dependencies (the real editors' files left to the first run)"
  python3 -m venv .venv-oldest
  .venv-oldest/bin/python -m pip install --quiet --upgrade pip
  python3 scripts/lower_bounds.py > .venv-oldest/constraints.txt
  .venv-oldest/bin/python -m pip install --quiet -e ".[test]" -c .venv-oldest/constraints.txt
  .venv-oldest/bin/python -m compileall -q lsp_agent
  oldest=0
  # Nor the attack suite: the walls are the kernel's and a launcher of the standard library
  # only, which no dependency's version changes (the first run and the Python run have it).
  .venv-oldest/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
    --ignore-glob='tests/test_vscode*' --ignore-glob='tests/test_neovim*' \
    --ignore-glob='tests/test_emacs*' --ignore=tests/test_attacks.py || oldest=$?
  [ "$status" -ne 0 ] || status="$oldest"
  if [ -n "$other" ]; then
    echo "== pytest on Python $other ($python; the real editors' files left to the run above)"
    "$python" -m venv ".venv-$other"
    ".venv-$other/bin/python" -m pip install --quiet --upgrade pip
    ".venv-$other/bin/python" -m pip install --quiet -e ".[test]"
    ".venv-$other/bin/python" -m compileall -q lsp_agent
    again=0
    # The unprivileged attack run needs the system's own python of this version (root's pyenv
    # is closed to that user); the attack suite itself runs here as root.
    ".venv-$other/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile \
      --ignore-glob='tests/test_vscode*' --ignore-glob='tests/test_neovim*' \
      --ignore-glob='tests/test_emacs*' \
      --deselect tests/test_attacks.py::test_the_attack_suite_holds_as_an_unprivileged_user \
      || again=$?
    [ "$status" -ne 0 ] || status="$again"
  else
    echo "== no other supported Python (3.11 to 3.13) here: the suite ran on Python $main only"
  fi
fi
# The VS Code extension's unit tests (Node's test runner), in the build copy that
# tests/test_vscode.py packages the extension from (.cache/vscode-extension/).
echo "== npm test (editors/vscode)"
unit=0
.venv/bin/python -m tests.vscode_harness unit || unit=$?
[ "$status" -ne 0 ] || status="$unit"
exit "$status"
