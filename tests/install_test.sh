#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR — install attntune into a temporary prefix and build the
# example against it twice, with find_package(attntune) and with pkg-config; run it (it says
# "no GPU" and exits 1 where there is none, and runs the codelab table where there is one).
set -eu
build=$1 src=$2
prefix=$(mktemp -d /tmp/attntune-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/attntune.h lib/libattntune.so lib/libattntune.a lib/pkgconfig/attntune.pc \
         lib/cmake/attntune/attntuneConfig.cmake bin/attntune; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
cmake -S "$src/examples" -B "$prefix/example-cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/example-cmake" >/dev/null
echo "ok: find_package(attntune) build"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" cc -std=c11 -Wall -Wextra -Werror "$src/examples/codelab.c" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs attntune) -lm -o "$prefix/codelab-pc"
echo "ok: pkg-config build"
# Static: the archive plus the private libraries and other link flags (a sanitized build's
# -fsanitize) pkg-config lists for it.
libs=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --static --libs-only-l --libs-only-other attntune |
  sed 's/-lattntune//')
cc -std=c11 -Wall -Wextra -Werror "$src/examples/codelab.c" -I"$prefix/include" "$prefix/lib/libattntune.a" \
  $libs -lm -o "$prefix/codelab-static"
echo "ok: static build"
set +e
out=$(LD_LIBRARY_PATH="$prefix/lib" "$prefix/example-cmake/codelab" 2>&1)
code=$?
set -e
echo "$out"
if [ $code -eq 1 ] && echo "$out" | grep -qi "no CUDA GPU\|cannot load the CUDA driver"; then
  echo "ok: no GPU here, said so"
elif [ $code -eq 0 ] && echo "$out" | grep -q "^codelab"; then
  echo "ok: ran on the GPU"
else
  echo "FAIL: codelab exited $code"
  exit 1
fi
