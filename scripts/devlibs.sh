#!/bin/sh
# devlibs.sh BUILD_DIR — copy the shared libraries the GPU machine lacks (libyaml, cmocka) into
# BUILD_DIR/devlibs, so a build made here runs there with LD_LIBRARY_PATH=BUILD_DIR/devlibs.
set -e
dir=${1:-build}/devlibs
mkdir -p "$dir"
for lib in libyaml-0.so.2 libcmocka.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$dir/"
done
