#!/usr/bin/env bash
# One-step set-up of a fresh Linux machine that has Node.js: the system packages Arbor needs, then
# its npm packages. The README's first command and CI (.ci/run) both start with it.
#
#   scripts/setup.sh                  install what is missing, then npm ci
#   scripts/setup.sh --dry-run        say what it would install and run; change nothing
#   scripts/setup.sh --llama-server   also (best effort) the build tools and a llama-server built from
#                                     node-llama-cpp's bundled source, for the llamacpp live test (CI)
#   scripts/setup.sh --python         also (best effort) Debian's python3-numpy and python3-torch, for the
#                                     Python client's and the PyTorch trainer's tests (CI; python/)
#   scripts/setup.sh --browser        also (best effort) Debian's chromium, for the dashboard's end-to-end
#                                     test in a headless browser (CI; src/cli/dashboard/)
#
# System packages (apt-get; installed only when their command is missing): bubblewrap (the tool
# sandboxes), util-linux (setpriv, prlimit: the sandbox's uid and limits), strace (grader-access
# detection), bc (the calc tool), patch (swe-mini set-up). As root it runs apt-get itself; otherwise
# it says what it installs and asks for sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0
llama=0
python=0
browser=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    --llama-server) llama=1 ;;
    --python) python=1 ;;
    --browser) browser=1 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup: unknown option '$arg' (known: --dry-run, --llama-server, --python, --browser, --help)" >&2; exit 2 ;;
  esac
done

say() { echo "setup: $*"; }
# Runs a command, or only prints it under --dry-run.
run() {
  if [ "$dry" = 1 ]; then say "would run: $*"; else say "running: $*"; "$@"; fi
}

# Node.js is the one prerequisite this script does not install.
if ! command -v node >/dev/null 2>&1; then
  echo "setup: Node.js is not installed: Arbor needs Node.js >= 20.19 (https://nodejs.org)" >&2
  exit 1
fi
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "setup: Node.js $(node --version) is too old: Arbor needs Node.js >= 20.19" >&2
  exit 1
fi

# "command package" pairs: the package is needed when its command is missing.
needed=""
for pair in bwrap:bubblewrap setpriv:util-linux prlimit:util-linux strace:strace bc:bc patch:patch; do
  cmd=${pair%%:*}
  pkg=${pair#*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && [[ " $needed " != *" $pkg "* ]]; then needed="$needed $pkg"; fi
done
needed=${needed# }

# The prefix that runs a command as root: nothing as root, sudo otherwise.
as_root=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
  else
    as_root="none"
  fi
fi

# apt_install PACKAGE...: install with apt-get as root; returns non-zero when it cannot.
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: no apt-get here: install $* with your package manager, then run this again" >&2
    return 1
  fi
  if [ "$as_root" = none ]; then
    echo "setup: installing $* needs root and sudo is not installed: run this script as root" >&2
    return 1
  fi
  local prefix=()
  [ -n "$as_root" ] && prefix=("$as_root")
  run "${prefix[@]}" apt-get update -qq
  run "${prefix[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

if [ -n "$needed" ]; then
  case "$as_root" in
    "") how="as root" ;;
    sudo) how="needs root: asking for sudo" ;;
    *) how="needs root" ;;
  esac
  say "installing system packages: $needed ($how)"
  # shellcheck disable=SC2086 # one word per package
  apt_install $needed
else
  say "system packages present (bubblewrap, util-linux, strace, bc, patch)"
fi

run npm ci --no-audit --no-fund

if [ "$llama" = 1 ]; then
  # Best effort: without llama-server the llamacpp live contract test says it is skipped and why.
  tools=""
  for pair in cmake:cmake ninja:ninja-build c++:g++ git:git; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || tools="$tools ${pair#*:}"
  done
  if [ -n "$tools" ]; then
    say "installing the llama-server build tools (best effort):$tools"
    # shellcheck disable=SC2086
    apt_install $tools || say "could not install$tools; the llama-server live test will be skipped"
  fi
  run scripts/build-llama-server.sh || say "llama-server build failed; the llama-server live test will be skipped"
fi
if [ "$python" = 1 ]; then
  # Best effort: the Python tests say they are skipped, and why, where no interpreter imports numpy and torch.
  # Debian's packages install for its own interpreter; ARBOR_PYTHON (as the tests read it) names another.
  if "${ARBOR_PYTHON:-/usr/bin/python3}" -c "import numpy, torch" >/dev/null 2>&1; then
    say "python3-numpy and python3-torch present"
  else
    say "installing python3-numpy and python3-torch (best effort)"
    apt_install --no-install-recommends python3-numpy python3-torch || say "could not install python3-numpy python3-torch; the Python trainer tests will be skipped"
  fi
fi
if [ "$browser" = 1 ]; then
  # Best effort: without chromium the dashboard's browser test says it is skipped and why.
  if command -v chromium >/dev/null 2>&1; then
    say "chromium present"
  else
    say "installing chromium (best effort)"
    apt_install --no-install-recommends chromium || say "could not install chromium; the dashboard's browser test will be skipped"
  fi
fi
[ "$dry" = 1 ] || say "done"
