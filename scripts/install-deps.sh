#!/bin/sh
# install-deps.sh — the Debian/Ubuntu packages attntune builds with. The CUDA toolkit (headers,
# NVRTC, cuDNN headers) is expected in /usr/local/cuda or $CUDA_HOME; the GPU driver and cuDNN
# library are only needed to run on a GPU.
set -e
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq build-essential cmake pkg-config libsqlite3-dev libyaml-dev \
  libcmocka-dev >/dev/null
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "install-deps: no CUDA toolkit at $cuda (need nvrtc.h, cuda.h, libnvrtc); install it or set CUDA_HOME" >&2
  exit 1
fi
