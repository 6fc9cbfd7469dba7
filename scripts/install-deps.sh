#!/usr/bin/env bash
# Installs what the build and tests need from Debian's packages (and the npm packages of tests/js).
# Idempotent: does nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
# --build-only: just what building and running the engine needs (no JS test oracles).
BUILD_ONLY=0
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=1

PKGS=(cmake ninja-build g++ clang libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libpcre2-dev
      libcpp-httplib-dev libhwy-dev libomp-dev pkg-config)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run the JS oracles. Some images ship them outside dpkg (where Debian's npm package
# conflicts with the installed one), so test for the commands, and ask apt only when they are absent.
if [ "$BUILD_ONLY" -eq 0 ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# JavaScript oracles used by the tests (tokenizer port, the official openai client), pinned by lockfile.
if [ "$BUILD_ONLY" -eq 0 ] && [ -f tests/js/package.json ] && [ ! -d tests/js/node_modules ]; then
  echo "install-deps: npm packages for tests/js"
  (cd tests/js && if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --silent; else npm install --no-audit --no-fund --silent; fi)
fi
