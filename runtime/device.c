/* device.c — device enumeration and properties, primary contexts, memory and events. */
#include <stdio.h>
#include <string.h>

#include "runtime/rt.h"

at_status rt_device_count(int *count)
{
  at_status rc = rt_driver_load();
  *count = 0;
  if (rc == AT_ERR_NO_DEVICE) return AT_OK; /* a driver without GPUs: zero devices */
  if (rc != AT_OK) return rc;
  return RT_CU(rt_cu()->cuDeviceGetCount(count));
}

void rt_driver_release(char *out, size_t cap)
{
  char line[512];
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  snprintf(out, cap, "unknown");
  if (!f) return;
  if (fgets(line, sizeof line, f)) {
    /* "NVRM version: NVIDIA UNIX [Open] Kernel Module [for x86_64]  580.159.04  Release ..."
     * The wording varies; the release is the first token that starts digits-dot-digit. */
    char *save = NULL; /* strtok_r: strtok's hidden state is shared by every thread */
    for (char *tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
      int major = 0, minor = 0;
      if (sscanf(tok, "%d.%d", &major, &minor) == 2 && tok[0] >= '0' && tok[0] <= '9') {
        snprintf(out, cap, "%s", tok);
        break;
      }
    }
  }
  fclose(f);
}

static at_status attribute(CUdevice dev, CUdevice_attribute attr, int *value)
{
  return RT_CU(rt_cu()->cuDeviceGetAttribute(value, attr, dev));
}

at_status rt_device_query(int ordinal, rt_device_info *info)
{
  const rt_driver *cu;
  CUdevice dev;
  int count = 0;
  at_status rc;
  memset(info, 0, sizeof *info);
  if ((rc = rt_device_count(&count)) != AT_OK) return rc;
  if (ordinal < 0 || ordinal >= count)
    return at_fail(AT_ERR_NO_DEVICE, "GPU %d does not exist (%d GPU%s present)", ordinal, count,
                   count == 1 ? "" : "s");
  cu = rt_cu();
  if ((rc = RT_CU(cu->cuDeviceGet(&dev, ordinal))) != AT_OK) return rc;
  info->ordinal = ordinal;
  if ((rc = RT_CU(cu->cuDeviceGetName(info->name, (int)sizeof info->name, dev))) != AT_OK) return rc;
  if ((rc = RT_CU(cu->cuDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, dev))) != AT_OK)
    return rc;
  if ((rc = RT_CU(cu->cuDeviceTotalMem(&info->total_mem, dev))) != AT_OK) return rc;
  if ((rc = RT_CU(cu->cuDriverGetVersion(&info->driver_version))) != AT_OK) return rc;
  struct {
    CUdevice_attribute attr;
    int *value;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info->cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info->cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->sm_count},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &info->l2_bytes},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info->smem_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &info->smem_per_sm},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &info->regs_per_sm},
      {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &info->clock_khz},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &info->mem_clock_khz},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &info->mem_bus_bits},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++)
    if ((rc = attribute(dev, attrs[i].attr, attrs[i].value)) != AT_OK) return rc;
  return AT_OK;
}

at_status rt_ctx_open(int ordinal, rt_ctx *ctx)
{
  at_status rc;
  memset(ctx, 0, sizeof *ctx);
  if ((rc = rt_device_query(ordinal, &ctx->info)) != AT_OK) return rc;
  const rt_driver *cu = rt_cu();
  ctx->ordinal = ordinal;
  if ((rc = RT_CU(cu->cuDeviceGet(&ctx->device, ordinal))) != AT_OK) return rc;
  if ((rc = RT_CU(cu->cuDevicePrimaryCtxRetain(&ctx->context, ctx->device))) != AT_OK) return rc;
  if ((rc = RT_CU(cu->cuCtxSetCurrent(ctx->context))) != AT_OK) {
    cu->cuDevicePrimaryCtxRelease(ctx->device);
    ctx->context = NULL;
    return rc;
  }
  at_arch_for_cc(ctx->info.cc_major, ctx->info.cc_minor, ctx->arch);
  return AT_OK;
}

at_status rt_ctx_bind(const rt_ctx *ctx) { return RT_CU(rt_cu()->cuCtxSetCurrent(ctx->context)); }

at_status rt_current_sm_count(int *sm_count)
{
  CUdevice dev;
  *sm_count = 0;
  at_status rc = RT_CU(rt_cu()->cuCtxGetDevice(&dev));
  return rc == AT_OK ? attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sm_count) : rc;
}

at_status rt_ctx_sync(const rt_ctx *ctx)
{
  (void)ctx;
  return RT_CU(rt_cu()->cuCtxSynchronize());
}

void rt_ctx_close(rt_ctx *ctx)
{
  if (ctx->context) rt_cu()->cuDevicePrimaryCtxRelease(ctx->device);
  ctx->context = NULL;
}

at_status rt_alloc(CUdeviceptr *ptr, size_t bytes)
{
  *ptr = 0;
  if (bytes == 0) bytes = 1; /* a valid, distinct pointer for empty tensors */
  at_status rc = RT_CU(rt_cu()->cuMemAlloc(ptr, bytes));
  if (rc != AT_OK) return at_fail_context(rc, "allocating %zu bytes on the GPU", bytes);
  return AT_OK;
}

void rt_free(CUdeviceptr ptr)
{
  if (ptr) rt_cu()->cuMemFree(ptr);
}

at_status rt_upload(CUdeviceptr dst, const void *src, size_t bytes)
{
  return RT_CU(rt_cu()->cuMemcpyHtoD(dst, src, bytes));
}

at_status rt_download(void *dst, CUdeviceptr src, size_t bytes)
{
  return RT_CU(rt_cu()->cuMemcpyDtoH(dst, src, bytes));
}

at_status rt_fill_u8(CUdeviceptr dst, unsigned char value, size_t bytes)
{
  return RT_CU(rt_cu()->cuMemsetD8(dst, value, bytes));
}

at_status rt_fill_u32(CUdeviceptr dst, uint32_t value, size_t count)
{
  return RT_CU(rt_cu()->cuMemsetD32(dst, value, count));
}

at_status rt_event_ms(CUevent start, CUevent stop, float *ms)
{
  at_status rc = RT_CU(rt_cu()->cuEventSynchronize(stop));
  if (rc != AT_OK) return rc;
  return RT_CU(rt_cu()->cuEventElapsedTime(ms, start, stop));
}
