/*
 * compile.c — compile many variants (generator/ emits, this compiles) with NVRTC in a pool of threads. NVRTC runs on the CPU and is
 * thread-safe across programs; each worker takes the next index from a shared counter.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/rt.h"

typedef struct pool {
  const gen_variant *variants;
  const gen_target *target;
  rt_compiled *out;
  int n;
  int next; /* guarded by lock */
  pthread_mutex_t lock;
} pool;

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void compile_one(const gen_variant *v, const gen_target *target, rt_compiled *c)
{
  char *source = NULL;
  char entries[GEN_MAX_KERNELS][GEN_ENTRY_MAX];
  int n_entries = 0;
  double t0 = now_ms();
  memset(c, 0, sizeof *c);
  c->variant = *v;
  c->resources.registers = c->resources.spill_store_bytes = c->resources.spill_load_bytes = -1;
  c->resources.stack_bytes = c->resources.smem_bytes = -1;
  c->status = gen_variant_key(v, c->key, sizeof c->key);
  if (c->status == AT_OK) c->status = gen_entry_names(v, entries, &n_entries);
  if (c->status == AT_OK) c->status = gen_emit(v, target, &source);
  if (c->status == AT_OK) c->status = rt_compile(source, c->key, target->arch, NULL, 0, &c->binary);
  if (c->status == AT_OK) {
    const rt_kernel_resources *r = rt_binary_kernel(&c->binary, entries[0]);
    /* No report (a process that loaded NVRTC with its compile cache on, see runtime/nvrtc.c):
     * the cubin is still good; its resources stay unknown (-1). */
    if (r) c->resources = *r;
    /* Spills and stack of the other kernels (a split-KV combine) count too: "zero spills" is
     * about the variant, not its first kernel. */
    for (int i = 1; r && i < n_entries; i++) {
      const rt_kernel_resources *o = rt_binary_kernel(&c->binary, entries[i]);
      if (!o) continue;
      c->resources.spill_store_bytes += o->spill_store_bytes > 0 ? o->spill_store_bytes : 0;
      c->resources.spill_load_bytes += o->spill_load_bytes > 0 ? o->spill_load_bytes : 0;
      c->resources.stack_bytes += o->stack_bytes > 0 ? o->stack_bytes : 0;
    }
  }
  if (c->status != AT_OK) snprintf(c->message, sizeof c->message, "%s", at_last_error());
  c->compile_ms = now_ms() - t0;
  free(source);
}

static void *worker(void *arg)
{
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    int i = p->next++;
    pthread_mutex_unlock(&p->lock);
    if (i >= p->n) return NULL;
    compile_one(&p->variants[i], p->target, &p->out[i]);
  }
}

at_status rt_compile_all(const gen_variant *variants, int n, const gen_target *target, int jobs,
                          rt_compiled *out)
{
  pool p = {variants, target, out, n, 0, PTHREAD_MUTEX_INITIALIZER};
  pthread_t threads[64];
  int started = 0;
  if (jobs <= 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    jobs = cpus > 0 ? (int)cpus : 1;
  }
  if (jobs > 64) jobs = 64;
  if (jobs > n) jobs = n;
  for (int i = 0; i < jobs; i++) {
    if (pthread_create(&threads[started], NULL, worker, &p) != 0) break;
    started++;
  }
  if (started == 0) worker(&p); /* no threads to be had: compile on this one */
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  return AT_OK;
}

void rt_compiled_free(rt_compiled *c, int n)
{
  for (int i = 0; i < n; i++) rt_binary_free(&c[i].binary);
}
