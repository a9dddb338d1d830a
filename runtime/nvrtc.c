/*
 * nvrtc.c — run-time compilation of CUDA source to a cubin with NVRTC, keeping the compile log
 * and the resource report (registers, spills, stack, shared memory) that ptxas writes into it.
 * Works without a GPU: NVRTC runs on the CPU.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

#include "runtime/rt.h"

/* NVRTC is loaded at run time, like the driver, for two reasons: a missing NVRTC is then an error
 * message rather than a failed start, and CUDA_CACHE_DISABLE can be set before NVRTC reads it.
 * NVRTC (CUDA 12.9 and newer) keeps an on-disk compile cache whose hits skip ptxas, and with it
 * the resource report (registers, spills) that pruning and the tuner's records rely on; NVRTC
 * reads the variable when it is loaded, so setting it later has no effect. */
#define NVRTC_FUNCTIONS(X)                                                                       \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram)          \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)         \
  X(nvrtcDestroyProgram)

static struct {
#define NVRTC_FIELD(name) __typeof__(&name) name;
  NVRTC_FUNCTIONS(NVRTC_FIELD)
#undef NVRTC_FIELD
} g_nvrtc;
static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;
static char g_nvrtc_error[1024];

#define AT_STR_(x) #x
#define AT_STR(x) AT_STR_(x)

static void load_nvrtc(void)
{
  /* The soname of the toolkit built against, then the file the build linked. */
  static const char *const CANDIDATES[] = {"libnvrtc.so." AT_STR(AT_NVRTC_MAJOR), AT_NVRTC_PATH};
  void *lib = NULL;
  setenv("CUDA_CACHE_DISABLE", "1", 1);
  for (size_t i = 0; !lib && i < sizeof CANDIDATES / sizeof *CANDIDATES; i++)
    lib = dlopen(CANDIDATES[i], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    snprintf(g_nvrtc_error, sizeof g_nvrtc_error, "cannot load NVRTC (%s or %s): %s; is the CUDA "
             "toolkit's NVRTC installed and on the loader path?", CANDIDATES[0], CANDIDATES[1], dlerror());
    return;
  }
#define NVRTC_RESOLVE(name)                                                                      \
  if (!(*(void **)&g_nvrtc.name = dlsym(lib, #name))) {                                          \
    snprintf(g_nvrtc_error, sizeof g_nvrtc_error, "NVRTC lacks %s", #name);                      \
    return;                                                                                      \
  }
  NVRTC_FUNCTIONS(NVRTC_RESOLVE)
#undef NVRTC_RESOLVE
}

at_status rt_nvrtc_load(void)
{
  pthread_once(&g_nvrtc_once, load_nvrtc);
  if (!g_nvrtc.nvrtcDestroyProgram) return at_fail(AT_ERR_COMPILE, "%s", g_nvrtc_error);
  return AT_OK;
}

static at_status nvrtc_check(nvrtcResult r, const char *expr, const char *name, int line)
{
  if (r == NVRTC_SUCCESS) return AT_OK;
  return at_fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? AT_ERR_NOMEM : AT_ERR_COMPILE,
                 "%s failed for '%s': %s (runtime/nvrtc.c:%d)", expr, name,
                 g_nvrtc.nvrtcGetErrorString(r), line);
}
#define NVRTC(expr, name) nvrtc_check((expr), #expr, (name), __LINE__)

at_status rt_nvrtc_version(int *major, int *minor)
{
  at_status rc = rt_nvrtc_load();
  if (rc != AT_OK) return rc;
  return NVRTC(g_nvrtc.nvrtcVersion(major, minor), "version");
}

void rt_nvrtc_version_text(char *buf, size_t size)
{
  int major = 0, minor = 0;
  if (!size) return;
  buf[0] = '\0';
  if (rt_nvrtc_version(&major, &minor) == AT_OK) snprintf(buf, size, "%d.%d", major % 1000, minor % 1000);
}

static rt_kernel_resources *begin_kernel(rt_binary *bin, const char *name, size_t len)
{
  if (bin->n_kernels >= (int)(sizeof bin->kernels / sizeof *bin->kernels)) return NULL;
  rt_kernel_resources *k = &bin->kernels[bin->n_kernels++];
  memset(k, 0, sizeof *k);
  k->registers = k->spill_store_bytes = k->spill_load_bytes = k->stack_bytes = k->smem_bytes = -1;
  if (len >= sizeof k->name) len = sizeof k->name - 1;
  memcpy(k->name, name, len);
  k->name[len] = '\0';
  return k;
}

/* The integer written just before `label` in line ("... 16 bytes spill stores"), or -1. */
static int number_before(const char *line, const char *label)
{
  const char *at = strstr(line, label);
  if (!at) return -1;
  while (at > line && at[-1] == ' ') at--;
  const char *digits = at;
  while (digits > line && digits[-1] >= '0' && digits[-1] <= '9') digits--;
  return digits == at ? -1 : atoi(digits);
}

/* Copies the line at *at (without its newline, cut to size - 1 bytes) into buf and moves *at to
 * the next one; 0 at the end of the log. */
static int next_line(const char **at, char *buf, size_t size)
{
  const char *line = *at;
  if (!line || !*line) return 0;
  const char *end = strchr(line, '\n');
  size_t len = end ? (size_t)(end - line) : strlen(line);
  if (len >= size) len = size - 1;
  memcpy(buf, line, len);
  buf[len] = '\0';
  *at = end ? end + 1 : NULL;
  return 1;
}

/* Marks the kernels whose wgmmas ptxas serialized. ptxas says so ahead of the function's resource
 * lines, naming it at the end of the line ("... in the function 'NAME'"), with one of several
 * codes by the reason (C7515: a non-wgmma instruction defines an accumulator inside the pipeline;
 * C7511: too few registers), so the phrase is what is matched. */
static void mark_serialized_wgmmas(rt_binary *bin)
{
  char buf[1024];
  for (const char *at = bin->log; next_line(&at, buf, sizeof buf);) {
    const size_t len = strlen(buf);
    if (!strstr(buf, "wgmma.mma_async instructions are serialized") || len < 2 || buf[len - 1] != '\'') continue;
    buf[len - 1] = '\0';
    const char *name = strrchr(buf, '\'');
    for (int i = 0; name && i < bin->n_kernels; i++)
      if (strcmp(bin->kernels[i].name, name + 1) == 0) bin->kernels[i].wgmma_serialized = 1;
  }
}

/* Read ptxas' -v lines, which come per entry function in this order:
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90a'
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, ... */
static void parse_resources(rt_binary *bin)
{
  rt_kernel_resources *cur = NULL;
  char buf[1024];
  for (const char *at = bin->log; next_line(&at, buf, sizeof buf);) {
    const char *p;
    if ((p = strstr(buf, "Compiling entry function '")) != NULL) {
      p += strlen("Compiling entry function '");
      const char *q = strchr(p, '\'');
      cur = begin_kernel(bin, p, q ? (size_t)(q - p) : strlen(p));
    } else if (cur && strstr(buf, "bytes stack frame")) {
      cur->stack_bytes = number_before(buf, "bytes stack frame");
      cur->spill_store_bytes = number_before(buf, "bytes spill stores");
      cur->spill_load_bytes = number_before(buf, "bytes spill loads");
    } else if (cur && strstr(buf, "Used ")) {
      cur->registers = number_before(buf, "registers");
      cur->smem_bytes = strstr(buf, "bytes smem") ? number_before(buf, "bytes smem") : 0;
    }
  }
  mark_serialized_wgmmas(bin);
}

static at_status fetch_log(nvrtcProgram prog, const char *name, rt_binary *out)
{
  size_t size = 0;
  at_status rc = NVRTC(g_nvrtc.nvrtcGetProgramLogSize(prog, &size), name);
  if (rc != AT_OK) return rc;
  out->log = malloc(size + 1);
  if (!out->log) return at_fail(AT_ERR_NOMEM, "no memory for the compile log of '%s'", name);
  out->log[0] = '\0';
  if (size > 0 && (rc = NVRTC(g_nvrtc.nvrtcGetProgramLog(prog, out->log), name)) != AT_OK) return rc;
  out->log[size] = '\0';
  return AT_OK;
}

static at_status fetch_cubin(nvrtcProgram prog, const char *name, rt_binary *out)
{
  at_status rc = NVRTC(g_nvrtc.nvrtcGetCUBINSize(prog, &out->cubin_size), name);
  if (rc != AT_OK) return rc;
  if (out->cubin_size == 0)
    return at_fail(AT_ERR_COMPILE, "NVRTC produced no cubin for '%s' (was a virtual "
                   "compute_XX architecture given instead of sm_XX?)", name);
  out->cubin = malloc(out->cubin_size);
  if (!out->cubin) return at_fail(AT_ERR_NOMEM, "no memory for the cubin of '%s'", name);
  return NVRTC(g_nvrtc.nvrtcGetCUBIN(prog, out->cubin), name);
}

at_status rt_compile(const char *source, const char *name, const char *arch,
                     const char *const *extra_opts, int n_extra, rt_binary *out)
{
  int major, minor, specific;
  char arch_opt[64];
  const char *opts[32];
  int n_opts = 0;
  nvrtcProgram prog = NULL;
  at_status rc;

  memset(out, 0, sizeof *out);
  if ((rc = rt_nvrtc_load()) != AT_OK) return rc;
  if ((rc = at_arch_parse(arch, &major, &minor, &specific)) != AT_OK) return rc;
  if (n_extra < 0 || n_extra > 24) return at_fail(AT_ERR_INVALID, "too many NVRTC options (%d)", n_extra);
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d%d%s", major, minor,
           specific ? "a" : "");
  opts[n_opts++] = arch_opt;
  opts[n_opts++] = "--std=c++17";
  opts[n_opts++] = "--ptxas-options=-v";
  opts[n_opts++] = "--device-int128";
  for (int i = 0; i < n_extra; i++) opts[n_opts++] = extra_opts[i];

  if ((rc = NVRTC(g_nvrtc.nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL), name)) != AT_OK) return rc;
  nvrtcResult compiled = g_nvrtc.nvrtcCompileProgram(prog, n_opts, opts);
  if ((rc = fetch_log(prog, name, out)) != AT_OK) goto done;
  if (compiled != NVRTC_SUCCESS) {
    rc = at_fail(AT_ERR_COMPILE, "NVRTC could not compile '%s' for %s: %s\n%s", name, arch,
                 g_nvrtc.nvrtcGetErrorString(compiled), out->log);
    goto done;
  }
  if ((rc = fetch_cubin(prog, name, out)) != AT_OK) goto done;
  parse_resources(out);
done:
  g_nvrtc.nvrtcDestroyProgram(&prog);
  if (rc != AT_OK) {
    /* Keep the log for the caller; drop the half-made cubin. */
    free(out->cubin);
    out->cubin = NULL;
    out->cubin_size = 0;
  }
  return rc;
}

void rt_binary_free(rt_binary *bin)
{
  free(bin->cubin);
  free(bin->log);
  memset(bin, 0, sizeof *bin);
}

const rt_kernel_resources *rt_binary_kernel(const rt_binary *bin, const char *kernel)
{
  for (int i = 0; i < bin->n_kernels; i++)
    if (strcmp(bin->kernels[i].name, kernel) == 0) return &bin->kernels[i];
  return NULL;
}
