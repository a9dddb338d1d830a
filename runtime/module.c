/* module.c — loading cubins, looking up kernels, launching them. */
#include <string.h>

#include "runtime/rt.h"

at_status rt_module_load(const void *cubin, CUmodule *module)
{
  at_status rc = rt_driver_load();
  if (rc != AT_OK) return rc;
  return RT_CU(rt_cu()->cuModuleLoadData(module, cubin));
}

at_status rt_module_compile(const char *source, const char *name, const char *arch, CUmodule *module)
{
  rt_binary bin;
  memset(&bin, 0, sizeof bin);
  at_status rc = rt_compile(source, name, arch, NULL, 0, &bin);
  if (rc == AT_OK) rc = rt_module_load(bin.cubin, module);
  rt_binary_free(&bin);
  return rc;
}

void rt_module_unload(CUmodule module)
{
  if (module) rt_cu()->cuModuleUnload(module);
}

at_status rt_module_function(CUmodule module, const char *name, CUfunction *fn)
{
  at_status rc = RT_CU(rt_cu()->cuModuleGetFunction(fn, module, name));
  if (rc != AT_OK) return at_fail_context(rc, "looking up kernel '%s'", name);
  return AT_OK;
}

at_status rt_function_set_smem(CUfunction fn, int bytes)
{
  return RT_CU(rt_cu()->cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
}

at_status rt_launch(CUfunction fn, const rt_launch_dims *d, CUstream stream, void **args)
{
  for (int i = 0; i < 3; i++)
    if (d->grid[i] == 0 || d->block[i] == 0)
      return at_fail(AT_ERR_INVALID, "launch with an empty grid or block (%ux%ux%u, %ux%ux%u)",
                     d->grid[0], d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2]);
  at_status rc;
  if (d->programmatic) {
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = d->grid[0], cfg.gridDimY = d->grid[1], cfg.gridDimZ = d->grid[2];
    cfg.blockDimX = d->block[0], cfg.blockDimY = d->block[1], cfg.blockDimZ = d->block[2];
    cfg.sharedMemBytes = d->smem_bytes, cfg.hStream = stream, cfg.attrs = &attr, cfg.numAttrs = 1;
    rc = RT_CU(rt_cu()->cuLaunchKernelEx(&cfg, fn, args, NULL));
  } else {
    rc = RT_CU(rt_cu()->cuLaunchKernel(fn, d->grid[0], d->grid[1], d->grid[2], d->block[0], d->block[1],
                                       d->block[2], d->smem_bytes, stream, args, NULL));
  }
  if (rc != AT_OK)
    return at_fail_context(rc, "launching grid %ux%ux%u block %ux%ux%u smem %u", d->grid[0],
                           d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2],
                           d->smem_bytes);
  return AT_OK;
}
