#!/usr/bin/env bash
# Build llama.cpp's llama-server from the source node-llama-cpp ships (a git bundle in node_modules)
# into a cache directory outside the repo, for the llamacpp adapter's live contract test
# (src/backends/llamacpp-live.test.ts finds it at the same path, or at $ARBOR_LLAMA_SERVER).
#
#   scripts/build-llama-server.sh      prints the binary's path; does nothing when it is already built
#
# Cache: ${ARBOR_CACHE:-$HOME/.cache/arbor}/llama-server/<first 16 hex of the bundle's sha256>/llama-server
# Needs git, cmake, ninja and a C++ compiler; ~6-10 min on 2 cores. Nothing is downloaded: the web UI
# is not fetched (LLAMA_USE_PREBUILT_UI=OFF) and curl/OpenSSL are off.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle="$PWD/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
  echo "build-llama-server: $bundle not found (install the packages first: npm ci)" >&2
  exit 1
fi
sha=$(sha256sum "$bundle" | cut -c1-16)
dir="${ARBOR_CACHE:-$HOME/.cache/arbor}/llama-server/$sha"
bin="$dir/llama-server"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

missing=""
for tool in git cmake ninja c++; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  echo "build-llama-server: missing tools:$missing (Debian: apt-get install git cmake ninja-build g++)" >&2
  exit 1
fi

mkdir -p "$dir"
# One build at a time per bundle: a second caller waits, then finds the binary.
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

src="$dir/src"
log="$dir/build.log"
echo "build-llama-server: building llama-server from $bundle in $src (log: $log)" >&2
{
  # An interrupted build of this same bundle resumes (ninja is incremental); anything else starts over.
  if [ ! -f "$src/build/build.ninja" ]; then
    rm -rf "$src"
    git clone --quiet "$bundle" "$src"
  fi
  git -C "$src" log -1 --format='llama.cpp commit %H (%cd)'
  cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF
  ninja -C "$src/build" -j "${ARBOR_BUILD_JOBS:-$(nproc)}" llama-server
} >"$log" 2>&1 || {
  echo "build-llama-server: build failed; last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
}
# The binary finds its shared libraries (libllama, libggml*) next to it in build/bin through its
# build RPATH, so it is linked in place rather than copied; the link appears only once the build succeeded.
ln -sfn "$src/build/bin/llama-server" "$bin"
"$bin" --version >>"$log" 2>&1 || {
  echo "build-llama-server: the built binary does not run; see $log" >&2
  rm -f "$bin"
  exit 1
}
echo "$bin"
