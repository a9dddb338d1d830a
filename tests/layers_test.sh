#!/bin/sh
# layers_test.sh — the layer rule of docs/design.md: imports run one way, top to bottom.
#
#     tuner/ python/  ->  runtime/  ->  generator/ | cache/  ->  core/ include/
#
# Fails, naming file, line and include, when a file includes a folder above its own (or beside it:
# generator/ and cache/ know nothing of each other), or when a pure layer (core/, generator/,
# cache/) includes a CUDA header. Usage: layers_test.sh [SOURCE_DIR]
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
status=0

# forbid FOLDER PATTERN WHY: every #include in FOLDER's C sources matching PATTERN is a violation.
forbid() {
  folder=$1 pattern=$2 why=$3
  [ -d "$folder" ] || return 0
  hits=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($pattern)" \
    $(find "$folder" -name '*.c' -o -name '*.h' | sort) /dev/null 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "$hits" | while IFS= read -r line; do echo "layers: $line: $why"; done
    status=1
  fi
}

forbid core      'generator/|cache/|runtime/|tuner/|python/' 'core/ includes only core/ and include/'
forbid generator 'cache/|runtime/|tuner/|python/'            'generator/ includes only generator/, core/ and include/'
forbid cache     'generator/|runtime/|tuner/|python/'        'cache/ includes only cache/, core/ and include/'
forbid runtime   'tuner/|python/'                             'runtime/ never includes tuner/ (the library links no tuner code)'
for pure in core generator cache; do
  forbid "$pure" 'cuda\.h|cuda_runtime|nvrtc\.h|cudnn' "$pure/ is pure C: no CUDA, NVRTC or cuDNN header"
done

if [ "$status" -eq 0 ]; then
  echo "layers: ok (core <- generator|cache <- runtime <- tuner)"
fi
exit "$status"
