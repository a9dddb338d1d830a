/*
 * cudnn.c — cuDNN, loaded at run time so that attntune starts where cuDNN is absent, and so a
 * chosen cuDNN can be used: $ATTNTUNE_CUDNN names a libcudnn.so.9 file or the folder holding it.
 * Also the table of backend entry points (rt_cudnn()) and the status check behind RT_CUDNN.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/cudnn_sdpa.h"
#include "runtime/rt.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_lib;
static at_status g_status = AT_ERR_CUDNN;
static char g_message[6144];
static char g_path[4096];
static size_t g_version;
static rt_cudnn_api g_api;

/* The backend entry points; all exist in every cuDNN 9 (cudnnGetLastErrorString since 9.0). */
static int resolve_functions(const char *path)
{
#define RESOLVE(name)                                                                            \
  *(void **)&g_api.name = dlsym(g_lib, #name);                                                   \
  if (!g_api.name) {                                                                             \
    snprintf(g_message, sizeof g_message, "%s has no %s: cuDNN 9 or newer is needed", path, #name); \
    return 0;                                                                                    \
  }
  RT_CUDNN_FUNCTIONS(RESOLVE)
#undef RESOLVE
  return 1;
}

static void resolve_path(char *path, size_t cap)
{
  const char *env = getenv("ATTNTUNE_CUDNN");
  struct stat st;
  if (env && *env && stat(env, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(path, cap, "%s/libcudnn.so.9", env);
  else if (env && *env)
    snprintf(path, cap, "%s", env);
  else
    snprintf(path, cap, "libcudnn.so.9");
}

static void load_once(void)
{
  char path[4096];
  resolve_path(path, sizeof path);
  /* RTLD_GLOBAL: cuDNN's front library loads its sub-libraries (graph, engines) next to itself. */
  g_lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!g_lib) {
    snprintf(g_message, sizeof g_message, "cannot load cuDNN (%s): %s; set ATTNTUNE_CUDNN to the "
             "file or folder of libcudnn.so.9", path, dlerror());
    return;
  }
  size_t (*get_version)(void);
  *(void **)&get_version = dlsym(g_lib, "cudnnGetVersion");
  if (!get_version) {
    snprintf(g_message, sizeof g_message, "%s has no cudnnGetVersion: not a cuDNN library", path);
    return;
  }
  g_version = get_version();
  if (g_version < 90000) {
    snprintf(g_message, sizeof g_message, "%s is cuDNN %zu; attntune needs cuDNN 9 (the backend "
             "graph API with cudnnGetLastErrorString)", path, g_version);
    return;
  }
  if (!resolve_functions(path)) return;
  /* Record the file the loader actually picked, not just the name we asked for. */
  Dl_info info;
  if (dladdr(*(void **)&get_version, &info) && info.dli_fname)
    snprintf(g_path, sizeof g_path, "%s", info.dli_fname);
  else
    snprintf(g_path, sizeof g_path, "%s", path);
  g_status = AT_OK;
}

at_status rt_cudnn_load(void)
{
  pthread_once(&g_once, load_once);
  if (g_status != AT_OK) return rt_fail(g_status, "%s", g_message);
  return AT_OK;
}

at_status rt_cudnn_version(size_t *version, const char **path)
{
  at_status rc = rt_cudnn_load();
  if (rc != AT_OK) return rc;
  if (version) *version = g_version;
  if (path) *path = g_path;
  return AT_OK;
}

const rt_cudnn_api *rt_cudnn(void) { return &g_api; }

at_status rt_cudnn_check(cudnnStatus_t status, const char *expr, const char *file, int line)
{
  if (status == CUDNN_STATUS_SUCCESS) return AT_OK;
  char reason[1024] = "";
  if (g_api.cudnnGetLastErrorString) g_api.cudnnGetLastErrorString(reason, sizeof reason);
  const char *name = g_api.cudnnGetErrorString ? g_api.cudnnGetErrorString(status) : "?";
  /* Support problems (a shape, layout or dtype no engine takes) are the caller's to handle:
   * a distinct status, so a tuner can skip the shape rather than fail the run. */
  at_status code = CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED ? AT_ERR_UNSUPPORTED
                                                                              : AT_ERR_CUDNN;
  return rt_fail(code, "%s failed at %s:%d: %s (%d)%s%s", expr, file, line, name, (int)status,
                 reason[0] ? ": " : "", reason);
}
