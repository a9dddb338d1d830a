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

#include "runtime/cudnn.h"
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
  if (g_status != AT_OK) return at_fail(g_status, "%s", g_message);
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

void rt_cudnn_version_text(char *buf, size_t size)
{
  size_t version = 0;
  if (!size) return;
  buf[0] = '\0';
  if (rt_cudnn_version(&version, NULL) != AT_OK) return;
  unsigned v = (unsigned)(version % 1000000); /* cuDNN 9 numbers itself major * 10000 + minor * 100 + patch */
  snprintf(buf, size, "%u.%u.%u", v / 10000, (v % 10000) / 100, v % 100);
}

const rt_cudnn_api *rt_cudnn(void) { return &g_api; }

/* Append "; " (between items), a prefix and text[0..len) to out, within cap. */
static void append_item(char *out, size_t cap, size_t *used, const char *prefix, const char *text, size_t len)
{
  int n = snprintf(out + *used, cap - *used, "%s%s%.*s", *used ? "; " : "", prefix, (int)len, text);
  if (n > 0) *used += (size_t)n < cap - *used ? (size_t)n : cap - *used - 1;
}

void rt_cudnn_summarize(const char *raw, char *out, size_t cap)
{
  size_t used = 0;
  int new_block = 1, any_reason = 0;
  long engine = -1;
  if (!cap) return;
  out[0] = '\0';
  for (const char *line = raw; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    while (len && (*line == ' ' || *line == '\t')) line++, len--;
    while (len && (line[len - 1] == ' ' || line[len - 1] == '\r')) len--;
    const char *why = memmem(line, len, "Reason: ", 8);
    const char *eng = memmem(line, len, "{\"engineId\":", 12);
    if (len == 0 || memmem(line, len, "===", 3)) {
      new_block = 1;
    } else if (eng) {
      engine = strtol(eng + 12, NULL, 10);
      new_block = 1;
    } else if (why && !memmem(line, len, "CUDNN_STATUS_SUCCESS", 20)) {
      any_reason = 1;
      const char *text = why + 8;
      size_t n = (size_t)(line + len - text);
      char probe[512];
      snprintf(probe, sizeof probe, "%.*s", (int)n, text);
      if (new_block && n && !strstr(out, probe)) {
        char prefix[32] = "";
        if (engine >= 0) snprintf(prefix, sizeof prefix, "[eng%ld] ", engine);
        append_item(out, cap, &used, prefix, text, n);
      }
      new_block = 0;
    }
    if (!end) break;
    line = end + 1;
  }
  if (any_reason) return;
  /* no reasons: the text as one line */
  used = 0;
  for (const char *c = raw; *c && used + 1 < cap; c++) {
    char ch = (*c == '\n' || *c == '\r' || *c == '\t') ? ' ' : *c;
    if (ch == ' ' && (used == 0 || out[used - 1] == ' ')) continue;
    out[used++] = ch;
  }
  while (used && out[used - 1] == ' ') used--;
  out[used] = '\0';
}

void rt_cudnn_last_reason(char *out, size_t cap)
{
  /* cuDNN lists every engine it tried: a few KB */
  enum { RAW_CAP = 32768 };
  char *raw = malloc(RAW_CAP);
  if (cap) out[0] = '\0';
  if (!raw || !g_api.cudnnGetLastErrorString) {
    free(raw);
    return;
  }
  raw[0] = '\0';
  g_api.cudnnGetLastErrorString(raw, RAW_CAP);
  raw[RAW_CAP - 1] = '\0';
  rt_cudnn_summarize(raw, out, cap);
  free(raw);
}

at_status rt_cudnn_check(cudnnStatus_t status, const char *expr, const char *file, int line)
{
  if (status == CUDNN_STATUS_SUCCESS) return AT_OK;
  char reason[2048];
  rt_cudnn_last_reason(reason, sizeof reason);
  const char *name = g_api.cudnnGetErrorString ? g_api.cudnnGetErrorString(status) : "?";
  /* Support problems (a shape, layout or dtype no engine takes) are the caller's to handle:
   * a distinct status, so a tuner can skip the shape rather than fail the run. */
  at_status code = CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED ? AT_ERR_UNSUPPORTED
                                                                              : AT_ERR_CUDNN;
  return at_fail(code, "%s failed at %s:%d: %s (%d)%s%s", expr, file, line, name, (int)status,
                 reason[0] ? ": " : "", reason);
}
