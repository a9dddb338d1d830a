/*
 * driver.c — the CUDA driver API, loaded with dlopen("libcuda.so.1") so that attntune starts on
 * machines without a GPU and reports the missing driver as an error instead of failing to start.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt.h"

#define RT_STR_(x) #x
#define RT_STR(x) RT_STR_(x) /* expands cuda.h's aliases first: cuMemAlloc -> "cuMemAlloc_v2" */

static rt_driver g_driver;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static at_status g_load_status = AT_ERR_NO_DRIVER;
static char g_load_message[1024];

static at_status resolve_symbols(void *lib)
{
#define RT_RESOLVE(name)                                                                         \
  *(void **)&g_driver.name = dlsym(lib, RT_STR(name));                                          \
  if (!g_driver.name) {                                                                          \
    snprintf(g_load_message, sizeof g_load_message,                                              \
             "libcuda.so.1 lacks %s: the NVIDIA driver is too old for this build", RT_STR(name)); \
    return AT_ERR_NO_DRIVER;                                                                     \
  }
  RT_DRIVER_FUNCTIONS(RT_RESOLVE)
#undef RT_RESOLVE
  return AT_OK;
}

static void load_once(void)
{
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    snprintf(g_load_message, sizeof g_load_message,
             "cannot load the CUDA driver (libcuda.so.1): %s; is an NVIDIA driver installed?",
             dlerror());
    g_load_status = AT_ERR_NO_DRIVER;
    return;
  }
  if ((g_load_status = resolve_symbols(lib)) != AT_OK) return;
  CUresult r = g_driver.cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    snprintf(g_load_message, sizeof g_load_message, "no CUDA GPU found (cuInit: CUDA_ERROR_NO_DEVICE)");
    g_load_status = AT_ERR_NO_DEVICE;
    return;
  }
  if (r != CUDA_SUCCESS) {
    const char *name = NULL;
    g_driver.cuGetErrorName(r, &name);
    snprintf(g_load_message, sizeof g_load_message, "cuInit(0) failed: %s (%d)",
             name ? name : "unknown", (int)r);
    g_load_status = (r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) ? AT_ERR_NO_DRIVER : AT_ERR_CUDA;
    return;
  }
  g_load_status = AT_OK;
}

at_status rt_driver_load(void)
{
  pthread_once(&g_once, load_once);
  if (g_load_status != AT_OK) return at_fail(g_load_status, "%s", g_load_message);
  return AT_OK;
}

const rt_driver *rt_cu(void) { return &g_driver; }

at_status rt_cu_check(CUresult result, const char *expr, const char *file, int line)
{
  if (result == CUDA_SUCCESS) return AT_OK;
  const char *name = NULL, *text = NULL;
  if (g_driver.cuGetErrorName) g_driver.cuGetErrorName(result, &name);
  if (g_driver.cuGetErrorString) g_driver.cuGetErrorString(result, &text);
  at_status code = result == CUDA_ERROR_OUT_OF_MEMORY ? AT_ERR_NOMEM : AT_ERR_CUDA;
  return at_fail(code, "%s failed: %s (%d: %s) at %s:%d", expr, name ? name : "CUDA error",
                 (int)result, text ? text : "no description", file, line);
}
