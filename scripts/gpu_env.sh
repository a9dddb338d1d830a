# gpu_env.sh — sourced by the GPU scripts (". scripts/gpu_env.sh"): the build's devlibs (libyaml,
# cmocka: the GPU machine lacks them) on LD_LIBRARY_PATH when $build names a build folder, and
# the newest cuDNN there (9.19 in the torch venv, ahead of the system's 9.14) unless
# ATTNTUNE_CUDNN already says which. ../shared/GPU.md says why.
cudnn919=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
if [ -n "${build:-}" ]; then
  export LD_LIBRARY_PATH="$PWD/$build/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -d "$cudnn919" ] && [ -z "${ATTNTUNE_CUDNN:-}" ]; then
  export ATTNTUNE_CUDNN="$cudnn919" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$cudnn919"
fi
