/* testutil.c — see testutil.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <grp.h>
#include <libgen.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/testutil.h"

int tu_open_gpu(rt_ctx *ctx)
{
  int count = 0;
  at_status rc = rt_device_count(&count);
  if (rc == AT_ERR_NO_DRIVER || (rc == AT_OK && count == 0)) {
    static int said;
    if (!said++) fprintf(stderr, "no GPU: %s\n", rc == AT_OK ? "no CUDA device" : at_last_error());
    return 0;
  }
  TU_OK(rc);
  TU_OK(rt_ctx_open(0, ctx));
  return 1;
}

rt_ctx tu_gpu;
int tu_have_gpu;

int tu_gpu_setup(void **state)
{
  (void)state;
  tu_have_gpu = tu_open_gpu(&tu_gpu);
  return 0;
}

int tu_gpu_teardown(void **state)
{
  (void)state;
  if (tu_have_gpu) rt_ctx_close(&tu_gpu);
  return 0;
}

CUdeviceptr tu_upload(at_dtype dtype, const float *host, size_t n)
{
  size_t bytes = n * at_dtype_size(dtype);
  void *packed = malloc(bytes ? bytes : 1);
  CUdeviceptr dev = 0;
  assert_non_null(packed);
  TU_OK(tn_pack(dtype, host, n, packed));
  TU_OK(rt_alloc(&dev, bytes));
  TU_OK(rt_upload(dev, packed, bytes));
  free(packed);
  return dev;
}

void tu_download(at_dtype dtype, CUdeviceptr dev, size_t n, float *host)
{
  size_t bytes = n * at_dtype_size(dtype);
  void *packed = malloc(bytes ? bytes : 1);
  assert_non_null(packed);
  TU_OK(rt_download(packed, dev, bytes));
  TU_OK(tn_unpack(dtype, packed, n, host));
  free(packed);
}

CUdeviceptr tu_alloc_poisoned(size_t bytes)
{
  CUdeviceptr dev = 0;
  TU_OK(rt_alloc(&dev, bytes));
  TU_OK(rt_fill_u8(dev, 0xFF, bytes));
  return dev;
}

int tu_run_attntune(const char *args, const char *dir, char *output, size_t size)
{
  char self[512], cmd[4096], out_path[600];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  snprintf(out_path, sizeof out_path, "%s/cli.out", dir);
  snprintf(cmd, sizeof cmd, "'%s/../attntune' %s > '%s' 2>&1", dirname(self), args, out_path);
  int status = system(cmd);
  assert_true(WIFEXITED(status));
  FILE *f = fopen(out_path, "r");
  assert_non_null(f);
  size_t got = fread(output, 1, size - 1, f);
  output[got] = '\0';
  fclose(f);
  return WEXITSTATUS(status);
}

float *tu_random_tensor(tn_rng *rng, at_dtype dtype, size_t n)
{
  float *x = malloc(n * sizeof *x);
  assert_non_null(x);
  tn_rng_fill(rng, x, n, -1.0f, 1.0f);
  tn_round_to_dtype(dtype, x, n);
  return x;
}

int tu_check_variants(const gen_variant *vs, int n, const gen_target *target, tu_variant_check check,
                      void *ctx)
{
  rt_compiled *comp = calloc((size_t)n, sizeof *comp);
  assert_true(n == 0 || comp != NULL);
  TU_OK(rt_compile_all(vs, n, target, 0, comp));
  int failures = 0;
  for (int i = 0; i < n; i++) {
    if (comp[i].status != AT_OK) {
      printf("    %s: compile failed: %s\n", comp[i].key, comp[i].message);
      failures++;
      continue;
    }
    rt_variant lv;
    TU_OK(rt_variant_load(&vs[i], comp[i].binary.cubin, &lv));
    failures += check(&lv, comp[i].key, i, ctx) != 0;
    rt_variant_unload(&lv);
  }
  rt_compiled_free(comp, n);
  free(comp);
  return failures;
}

char *tu_slurp(const char *path, size_t *size)
{
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  *size = (size_t)n;
  return buf;
}

void tu_assert_file_unchanged(const char *path, const char *before, size_t n)
{
  size_t now_n = 0;
  char *now = tu_slurp(path, &now_n);
  assert_non_null(now);
  assert_int_equal(now_n, n);
  assert_memory_equal(now, before, n);
  free(now);
  static const char *const SUFFIXES[] = {"-wal", "-shm", "-journal"};
  for (int i = 0; i < 3; i++) {
    char side[1100];
    snprintf(side, sizeof side, "%s%s", path, SUFFIXES[i]);
    if (access(side, F_OK) == 0) fail_msg("%s appeared", side);
  }
}

int tu_without_write_access(const char *dir, int (*fn)(void *), void *arg)
{
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
      fprintf(stderr, "SKIP: cannot become uid 65534 to read without write access\n");
      _exit(77);
    }
    if (access(dir, W_OK) == 0) {
      fprintf(stderr, "SKIP: uid %d can write %s despite mode 0555\n", (int)geteuid(), dir);
      _exit(77);
    }
    _exit(fn(arg));
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}
