#!/bin/sh
# python_gpu.sh — the Python package on the GPU machine (no network): install the wheels carried in
# .whl/ into a virtual environment that sees the machine's jax and torch, run the GPU pytest
# (JAX and torch in separate processes) and examples/codelab_jax.py. Logs and charts go to $OUT
# (or ./gpu-logs); a summary is printed last.
#
# On the build machine, from the repository root (fills .whl/, which git ignores):
#   pip wheel --no-deps -w .whl ./python
#   pip download -d .whl --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --no-deps \
#     pytest iniconfig pluggy packaging pygments matplotlib contourpy cycler fonttools kiwisolver \
#     pillow pyparsing python-dateutil six tzdata
# On the GPU machine, from the repository root:
#   scripts/python_gpu.sh
# PYTHON picks the interpreter that has jax (with its CUDA plugin) and torch.
set -u
out=${OUT:-gpu-logs}
mkdir -p "$out"
. "$(dirname "$0")/gpu_env.sh"
# JAX and torch share the GPU in one test run: no preallocation of 75% of its memory by XLA.
export XLA_PYTHON_CLIENT_PREALLOCATE=false

py=
for cand in ${PYTHON:-} /opt/torch/.venv/bin/python python3.12 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import jax, torch" >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
[ -n "$py" ] || { echo "python_gpu.sh: no Python with both jax and torch (set PYTHON)"; exit 1; }
ls .whl/attntune-*.whl >/dev/null 2>&1 || { echo "python_gpu.sh: no attntune wheel in .whl/ (see the header)"; exit 1; }

# Into a folder on PYTHONPATH, with --no-deps: the interpreter that has jax and torch is often a
# virtual environment itself, whose packages (numpy among them) a new --system-site-packages
# environment would not see.
site=${SITE:-/tmp/attntune-site}
rm -rf "$site"
# Four logs and four charts: the eight files a command runner brings back.
setup="$out/setup.log"
"$py" -m pip install -q --no-index --no-deps --target "$site" .whl/attntune-*.whl >"$setup" 2>&1 ||
  { cat "$setup"; exit 1; }
"$py" -c "import pytest" >/dev/null 2>&1 ||
  "$py" -m pip install -q --no-index --no-deps --target "$site" .whl/pytest-*.whl .whl/iniconfig-*.whl \
    .whl/pluggy-*.whl .whl/packaging-*.whl .whl/pygments-*.whl >>"$setup" 2>&1
"$py" -c "import matplotlib" >/dev/null 2>&1 ||
  "$py" -m pip install -q --no-index --no-deps --target "$site" .whl/matplotlib-*.whl .whl/contourpy-*.whl \
    .whl/cycler-*.whl .whl/fonttools-*.whl .whl/kiwisolver-*.whl .whl/pillow-*.whl .whl/pyparsing-*.whl \
    .whl/python_dateutil-*.whl .whl/six-*.whl >>"$setup" 2>&1 ||
  echo "matplotlib not installed (no wheels): the example skips its charts" >>"$setup"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

"$py" -c "import jax, torch, attntune; print('jax', jax.__version__, jax.devices(), '| torch', torch.__version__, torch.cuda.get_device_name(0), '| attntune', attntune.__version__, attntune.__file__)" \
  >>"$setup" 2>&1

# From the repository root, so that python/attntune (the source, without its libraries) is not
# what gets imported.
timeout 900 "$py" -m pytest -v -s -rs python/tests/test_package.py python/tests/test_jax_cpu.py \
  python/tests/test_gpu_jax.py >"$out/pytest-jax.log" 2>&1
jax_rc=$?
timeout 900 "$py" -m pytest -v -s -rs python/tests/test_torch_cpu.py python/tests/test_gpu_torch.py \
  >"$out/pytest-torch.log" 2>&1
torch_rc=$?
timeout 900 "$py" examples/codelab_jax.py --out "$out" >"$out/codelab_jax.txt" 2>&1
example_rc=$?

echo "== setup"; tail -n 5 "$setup"
echo "== pytest JAX (exit $jax_rc; full log pytest-jax.log)"
grep -E "PASSED|FAILED|ERROR|SKIPPED|JAX call|passed|failed" "$out/pytest-jax.log" | tail -n 60
echo "== pytest torch (exit $torch_rc; full log pytest-torch.log)"
grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$out/pytest-torch.log" | tail -n 40
echo "== examples/codelab_jax.py (exit $example_rc)"
cat "$out/codelab_jax.txt"
[ "$jax_rc" = 0 ] && [ "$torch_rc" = 0 ] && [ "$example_rc" = 0 ]
