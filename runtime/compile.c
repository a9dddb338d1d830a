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
    /* Spills, stack and serialized wgmmas of the other kernels (a split-KV combine) count too:
     * "zero spills" is about the variant, not its first kernel. */
    for (int i = 1; r && i < n_entries; i++) {
      const rt_kernel_resources *o = rt_binary_kernel(&c->binary, entries[i]);
      if (!o) continue;
      c->resources.spill_store_bytes += o->spill_store_bytes > 0 ? o->spill_store_bytes : 0;
      c->resources.spill_load_bytes += o->spill_load_bytes > 0 ? o->spill_load_bytes : 0;
      c->resources.stack_bytes += o->stack_bytes > 0 ? o->stack_bytes : 0;
      c->resources.wgmma_serialized |= o->wgmma_serialized;
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

/* ---- the runtime's own kernels (naive.cu, compare.cu) ------------------------------------------ */

at_status rt_template_source(const char *preamble, const char *body_name, char **source)
{
  size_t n_common = 0, n_body = 0;
  const char *common = at_template_text("common.cuh", &n_common);
  const char *body = at_template_text(body_name, &n_body);
  *source = NULL;
  if (!common || !body) return at_fail(AT_ERR_INVALID, "template %s is not embedded in this build", body_name);
  const size_t n_pre = strlen(preamble);
  char *text = malloc(n_pre + n_common + n_body + 2);
  if (!text) return at_fail(AT_ERR_NOMEM, "no memory for the source of %s", body_name);
  memcpy(text, preamble, n_pre);
  memcpy(text + n_pre, common, n_common);
  text[n_pre + n_common] = '\n';
  memcpy(text + n_pre + n_common + 1, body, n_body);
  text[n_pre + n_common + 1 + n_body] = '\0';
  *source = text;
  return AT_OK;
}

/* ---- compiled once per process: the memo ------------------------------------------------------ */

at_status rt_compiled_copy(const rt_compiled *src, rt_compiled *dst)
{
  *dst = *src;
  memset(&dst->binary, 0, sizeof dst->binary);
  dst->binary.n_kernels = src->binary.n_kernels;
  memcpy(dst->binary.kernels, src->binary.kernels, sizeof dst->binary.kernels);
  const size_t log_size = src->binary.log ? strlen(src->binary.log) + 1 : 0;
  if (src->binary.cubin_size) dst->binary.cubin = malloc(src->binary.cubin_size);
  if (log_size) dst->binary.log = malloc(log_size);
  if ((src->binary.cubin_size && !dst->binary.cubin) || (log_size && !dst->binary.log)) {
    rt_binary_free(&dst->binary);
    dst->status = AT_ERR_NOMEM;
    snprintf(dst->message, sizeof dst->message, "no memory for a copy of %s's %zu-byte cubin", src->key,
             src->binary.cubin_size);
    return at_fail(AT_ERR_NOMEM, "%s", dst->message);
  }
  if (src->binary.cubin_size) memcpy(dst->binary.cubin, src->binary.cubin, src->binary.cubin_size);
  dst->binary.cubin_size = src->binary.cubin_size;
  if (log_size) memcpy(dst->binary.log, src->binary.log, log_size);
  return AT_OK;
}

/* Entries never move (a list), so a thread can wait on one while others are added. */
typedef struct memo_entry {
  gen_target target;
  char key[GEN_KEY_MAX];
  int done; /* compiled (well or not): c is final */
  rt_compiled c;
  struct memo_entry *next;
} memo_entry;

struct rt_compile_memo {
  pthread_mutex_t lock;
  pthread_cond_t compiled;
  memo_entry *head;
  int hits, compiles;
};

at_status rt_compile_memo_create(rt_compile_memo **out)
{
  rt_compile_memo *m = calloc(1, sizeof *m);
  if (!m) return at_fail(AT_ERR_NOMEM, "no memory for the compile memo");
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->compiled, NULL);
  *out = m;
  return AT_OK;
}

void rt_compile_memo_destroy(rt_compile_memo *m)
{
  if (!m) return;
  for (memo_entry *e = m->head, *next; e; e = next) {
    next = e->next;
    rt_compiled_free(&e->c, 1);
    free(e);
  }
  pthread_mutex_destroy(&m->lock);
  pthread_cond_destroy(&m->compiled);
  free(m);
}

void rt_compile_memo_counts(rt_compile_memo *m, int *hits, int *compiles)
{
  pthread_mutex_lock(&m->lock);
  *hits = m->hits, *compiles = m->compiles;
  pthread_mutex_unlock(&m->lock);
}

static int same_target(const gen_target *a, const gen_target *b)
{
  return strcmp(a->arch, b->arch) == 0 && a->cc_major == b->cc_major && a->cc_minor == b->cc_minor &&
         a->smem_limit == b->smem_limit && a->sm_count == b->sm_count;
}

void rt_compile_memoized(rt_compile_memo *m, const gen_variant *v, const gen_target *target, rt_compiled *out)
{
  char key[GEN_KEY_MAX];
  if (gen_variant_key(v, key, sizeof key) != AT_OK) {
    compile_one(v, target, out); /* it fails the same way, with the message */
    return;
  }
  pthread_mutex_lock(&m->lock);
  memo_entry *e = m->head;
  while (e && !(strcmp(e->key, key) == 0 && same_target(&e->target, target))) e = e->next;
  if (e) {
    /* Another thread may be compiling it: wait for that rather than compile it twice. */
    while (!e->done) pthread_cond_wait(&m->compiled, &m->lock);
    m->hits++;
    pthread_mutex_unlock(&m->lock);
    rt_compiled_copy(&e->c, out);
    out->variant = *v;
    return;
  }
  e = calloc(1, sizeof *e);
  if (!e) {
    pthread_mutex_unlock(&m->lock);
    compile_one(v, target, out); /* no room to remember it: compile it anyway */
    return;
  }
  e->target = *target;
  snprintf(e->key, sizeof e->key, "%s", key);
  e->next = m->head, m->head = e;
  m->compiles++;
  pthread_mutex_unlock(&m->lock);
  compile_one(v, target, &e->c);
  rt_compiled_copy(&e->c, out);
  pthread_mutex_lock(&m->lock);
  e->done = 1;
  pthread_cond_broadcast(&m->compiled);
  pthread_mutex_unlock(&m->lock);
}
