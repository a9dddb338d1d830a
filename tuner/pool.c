/*
 * pool.c — the tuning run's shared worker threads; see pool.h.
 *
 * The batches in flight form a ring under the pool's lock. A worker takes the next entry of the
 * batch after the one served last (round robin), so that a GPU that submitted first does not keep
 * every CPU while the others wait for their first compile; a new batch is served first.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tuner/pool.h"

enum { ENTRY_QUEUED = 0, ENTRY_RUNNING, ENTRY_DONE };

struct tn_batch {
  tn_pool *pool;
  int n, next;     /* entries; the lowest one not yet started or skipped */
  int running;     /* entries in a worker's hands */
  char *wanted;    /* the caller's, copied */
  char *state;     /* ENTRY_* per entry */
  void (*run)(void *ctx, int i);
  void *ctx;
  tn_batch *prev, *after; /* the ring of batches with entries to start */
};

struct tn_pool {
  pthread_mutex_t lock;
  pthread_cond_t work; /* a batch was submitted, or the pool stops */
  pthread_cond_t done; /* an entry finished */
  tn_batch *ring;      /* the batch served next; NULL when none has an entry to start */
  int stopping;
  pthread_t threads[256];
  int n_threads;
};

static void ring_insert(tn_pool *p, tn_batch *b)
{
  if (!p->ring) {
    b->prev = b->after = b;
    p->ring = b;
    return;
  }
  b->after = p->ring, b->prev = p->ring->prev;
  b->prev->after = b, p->ring->prev = b;
  p->ring = b; /* served next: its GPU has nothing to verify until its first entry is done */
}

static void ring_remove(tn_pool *p, tn_batch *b)
{
  if (!b->after) return; /* not in the ring */
  if (b->after == b) {
    p->ring = NULL;
  } else {
    b->prev->after = b->after, b->after->prev = b->prev;
    if (p->ring == b) p->ring = b->after;
  }
  b->prev = b->after = NULL;
}

/* The next entry to start, its batch in *out; -1 when none. Skips entries not wanted, and takes
 * batches with nothing left to start out of the ring. Called with the lock held. */
static int take_entry(tn_pool *p, tn_batch **out)
{
  while (p->ring) {
    tn_batch *b = p->ring;
    while (b->next < b->n && !b->wanted[b->next]) b->next++;
    if (b->next == b->n) {
      ring_remove(p, b);
      continue;
    }
    int i = b->next++;
    b->state[i] = ENTRY_RUNNING;
    b->running++;
    p->ring = b->after; /* the next batch goes next */
    if (b->next == b->n) ring_remove(p, b);
    *out = b;
    return i;
  }
  return -1;
}

static void *worker(void *arg)
{
  tn_pool *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    tn_batch *b = NULL;
    int i = take_entry(p, &b);
    if (i < 0) {
      if (p->stopping) break;
      pthread_cond_wait(&p->work, &p->lock);
      continue;
    }
    pthread_mutex_unlock(&p->lock);
    b->run(b->ctx, i);
    pthread_mutex_lock(&p->lock);
    b->state[i] = ENTRY_DONE;
    b->running--;
    pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

at_status tn_pool_create(int threads, tn_pool **out)
{
  *out = NULL;
  if (threads < 1 || threads > 256)
    return at_fail(AT_ERR_INVALID, "a worker pool takes 1..256 threads, not %d", threads);
  tn_pool *p = calloc(1, sizeof *p);
  if (!p) return at_fail(AT_ERR_NOMEM, "no memory for a worker pool");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  for (int i = 0; i < threads; i++) {
    int err = pthread_create(&p->threads[i], NULL, worker, p);
    if (err != 0) {
      /* Out of threads means the process is short of resources; fewer workers would hide it. */
      at_status rc = at_fail(AT_ERR_NOMEM, "cannot start worker thread %d of %d: %s", i + 1, threads, strerror(err));
      tn_pool_destroy(p);
      return rc;
    }
    p->n_threads++;
  }
  *out = p;
  return AT_OK;
}

void tn_pool_destroy(tn_pool *p)
{
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  free(p);
}

at_status tn_pool_submit(tn_pool *p, int n, const char *wanted, void (*run)(void *ctx, int i), void *ctx,
                         tn_batch **out)
{
  *out = NULL;
  if (n < 0) return at_fail(AT_ERR_INVALID, "a batch of %d entries", n);
  tn_batch *b = calloc(1, sizeof *b);
  char *w = calloc((size_t)n + 1, 1), *state = calloc((size_t)n + 1, 1);
  if (!b || !w || !state) {
    free(b), free(w), free(state);
    return at_fail(AT_ERR_NOMEM, "no memory for a batch of %d entries", n);
  }
  memcpy(w, wanted, (size_t)n);
  b->pool = p, b->n = n, b->wanted = w, b->state = state, b->run = run, b->ctx = ctx;
  pthread_mutex_lock(&p->lock);
  ring_insert(p, b);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  *out = b;
  return AT_OK;
}

void tn_batch_wait(tn_batch *b, int i)
{
  if (i < 0 || i >= b->n || !b->wanted[i]) return;
  tn_pool *p = b->pool;
  pthread_mutex_lock(&p->lock);
  while (b->state[i] != ENTRY_DONE) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

void tn_batch_finish(tn_batch *b)
{
  if (!b) return;
  tn_pool *p = b->pool;
  pthread_mutex_lock(&p->lock);
  ring_remove(p, b);
  b->next = b->n;
  while (b->running > 0) pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
  free(b->wanted), free(b->state), free(b);
}
