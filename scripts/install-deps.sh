#!/bin/sh
# install-deps.sh [--fuzz] — the Debian/Ubuntu packages attntune builds with. The CUDA toolkit
# (headers, NVRTC, cuDNN headers) is expected in /usr/local/cuda or $CUDA_HOME; the GPU driver and
# cuDNN library are only needed to run on a GPU. --fuzz adds clang and its sanitizer and libFuzzer
# runtimes for scripts/fuzz.sh (about 45 MB to download; newer Debian ships the runtimes in
# libclang-rt-dev, older releases inside clang's own packages).
set -e
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq build-essential cmake pkg-config libsqlite3-dev libyaml-dev \
  libcmocka-dev >/dev/null
if [ "${1:-}" = --fuzz ]; then
  rt=
  apt-cache show libclang-rt-dev >/dev/null 2>&1 && rt=libclang-rt-dev
  $SUDO apt-get install -y -qq --no-install-recommends clang $rt >/dev/null
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "install-deps: no CUDA toolkit at $cuda (need nvrtc.h, cuda.h, libnvrtc); install it or set CUDA_HOME" >&2
  exit 1
fi
