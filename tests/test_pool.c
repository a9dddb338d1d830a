/* test_pool.c — the tuning run's shared NVRTC threads (tuner/pool.c), without NVRTC: entries are
 * counted, logged or made to block. Each wanted entry runs exactly once and unwanted ones never,
 * with batches submitted and awaited from several threads at once; the workers take the batches
 * in turn; finishing a batch drops its queued entries and waits for the running ones; bad sizes
 * are refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "tests/testutil.h"
#include "tuner/pool.h"

static void sleep_us(long us)
{
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* ---- every wanted entry once, from several submitting threads ---- */

enum { N_BATCHES = 6, N_ENTRIES = 200 };

typedef struct counted {
  atomic_int runs[N_ENTRIES];
  char wanted[N_ENTRIES];
  tn_pool *pool;
  int bad_waits; /* an awaited entry whose run had not finished, or ran twice */
} counted;

static void count_run(void *ctx, int i)
{
  counted *c = ctx;
  if (i % 7 == 0) sleep_us(200); /* some entries take a while, as compiles do */
  atomic_fetch_add(&c->runs[i], 1);
}

static void *submit_and_wait(void *arg)
{
  counted *c = arg;
  tn_batch *b = NULL;
  if (tn_pool_submit(c->pool, N_ENTRIES, c->wanted, count_run, c, &b) != AT_OK) return arg;
  for (int i = 0; i < N_ENTRIES; i++) {
    tn_batch_wait(b, i);
    if (c->wanted[i] && atomic_load(&c->runs[i]) != 1) c->bad_waits++;
  }
  tn_batch_finish(b);
  return NULL;
}

static void test_pool_runs_each_wanted_entry_once(void **state)
{
  (void)state;
  tn_pool *pool = NULL;
  TU_OK(tn_pool_create(4, &pool));
  static counted c[N_BATCHES];
  pthread_t th[N_BATCHES];
  memset(c, 0, sizeof c);
  for (int b = 0; b < N_BATCHES; b++) {
    c[b].pool = pool;
    for (int i = 0; i < N_ENTRIES; i++) c[b].wanted[i] = (char)((i + b) % 5 != 0);
    assert_int_equal(pthread_create(&th[b], NULL, submit_and_wait, &c[b]), 0);
  }
  for (int b = 0; b < N_BATCHES; b++) {
    void *failed = NULL;
    pthread_join(th[b], &failed);
    assert_null(failed);
  }
  tn_pool_destroy(pool);
  for (int b = 0; b < N_BATCHES; b++) {
    assert_int_equal(c[b].bad_waits, 0);
    int wanted = 0;
    for (int i = 0; i < N_ENTRIES; i++) {
      wanted += c[b].wanted[i];
      if (atomic_load(&c[b].runs[i]) != c[b].wanted[i])
        fail_msg("batch %d entry %d (wanted %d) ran %d times", b, i, c[b].wanted[i], atomic_load(&c[b].runs[i]));
    }
    assert_true(wanted > 100 && wanted < N_ENTRIES); /* both kinds present */
  }
}

/* ---- batches in turn ---- */

typedef struct logged {
  pthread_mutex_t lock;
  char order[64][4]; /* "a0", "b0", ... in the order the one worker ran them */
  int n;
  atomic_int a_started, b_submitted;
} logged;

typedef struct tagged {
  logged *log;
  char name;
} tagged;

static void log_run(void *ctx, int i)
{
  tagged *t = ctx;
  /* a's first entry waits for b to be in the pool, so the order after it is the pool's choice */
  if (t->name == 'a' && i == 0) atomic_store(&t->log->a_started, 1);
  while (t->name == 'a' && i == 0 && !atomic_load(&t->log->b_submitted)) sleep_us(100);
  pthread_mutex_lock(&t->log->lock);
  snprintf(t->log->order[t->log->n++], 4, "%c%d", t->name, i);
  pthread_mutex_unlock(&t->log->lock);
}

static void test_pool_serves_batches_in_turn(void **state)
{
  (void)state;
  tn_pool *pool = NULL;
  TU_OK(tn_pool_create(1, &pool));
  logged log;
  memset(&log, 0, sizeof log);
  pthread_mutex_init(&log.lock, NULL);
  tagged a = {&log, 'a'}, b = {&log, 'b'};
  char all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  tn_batch *ba = NULL, *bb = NULL;
  TU_OK(tn_pool_submit(pool, 8, all, log_run, &a, &ba));
  while (!atomic_load(&log.a_started)) sleep_us(100); /* the worker holds a0: b comes second */
  TU_OK(tn_pool_submit(pool, 3, all, log_run, &b, &bb));
  atomic_store(&log.b_submitted, 1);
  tn_batch_wait(ba, 7);
  tn_batch_wait(bb, 2);
  tn_batch_finish(ba);
  tn_batch_finish(bb);
  tn_pool_destroy(pool);
  /* One worker alternates while both have entries, then runs a's rest. */
  static const char *const expect[] = {"a0", "b0", "a1", "b1", "a2", "b2", "a3", "a4", "a5", "a6", "a7"};
  assert_int_equal(log.n, 11);
  for (int i = 0; i < 11; i++)
    if (strcmp(log.order[i], expect[i]) != 0) fail_msg("run %d was %s, expected %s", i, log.order[i], expect[i]);
  pthread_mutex_destroy(&log.lock);
}

/* ---- finishing early ---- */

static atomic_int g_slow_runs, g_slow_running;

static void slow_run(void *ctx, int i)
{
  (void)ctx, (void)i;
  atomic_fetch_add(&g_slow_running, 1);
  sleep_us(2000);
  atomic_fetch_add(&g_slow_runs, 1);
  atomic_fetch_sub(&g_slow_running, 1);
}

static void test_pool_finish_drops_queued_entries(void **state)
{
  (void)state;
  tn_pool *pool = NULL;
  TU_OK(tn_pool_create(2, &pool));
  char all[100];
  memset(all, 1, sizeof all);
  tn_batch *b = NULL;
  TU_OK(tn_pool_submit(pool, 100, all, slow_run, NULL, &b));
  tn_batch_wait(b, 2);
  tn_batch_finish(b); /* returns with nothing of the batch running */
  assert_int_equal(atomic_load(&g_slow_running), 0);
  int after = atomic_load(&g_slow_runs);
  assert_true(after >= 3 && after < 100);
  sleep_us(20000);
  assert_int_equal(atomic_load(&g_slow_runs), after); /* no entry started after finish */
  /* The pool goes on serving other batches. */
  tn_batch *again = NULL;
  TU_OK(tn_pool_submit(pool, 4, all, slow_run, NULL, &again));
  tn_batch_wait(again, 3);
  tn_batch_finish(again);
  assert_int_equal(atomic_load(&g_slow_runs), after + 4);
  tn_pool_destroy(pool);
}

static void test_pool_refuses_bad_sizes(void **state)
{
  (void)state;
  tn_pool *pool = NULL;
  assert_int_equal(tn_pool_create(0, &pool), AT_ERR_INVALID);
  assert_null(pool);
  assert_non_null(strstr(at_last_error(), "1..256 threads, not 0"));
  assert_int_equal(tn_pool_create(257, &pool), AT_ERR_INVALID);
  TU_OK(tn_pool_create(1, &pool));
  tn_batch *b = NULL;
  assert_int_equal(tn_pool_submit(pool, -1, "", slow_run, NULL, &b), AT_ERR_INVALID);
  assert_null(b);
  TU_OK(tn_pool_submit(pool, 0, "", slow_run, NULL, &b)); /* an empty batch is fine */
  tn_batch_finish(b);
  tn_pool_destroy(pool);
  tn_pool_destroy(NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_runs_each_wanted_entry_once),
      cmocka_unit_test(test_pool_serves_batches_in_turn),
      cmocka_unit_test(test_pool_finish_drops_queued_entries),
      cmocka_unit_test(test_pool_refuses_bad_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
