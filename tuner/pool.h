/*
 * pool.h — one pool of worker threads for a whole tuning run, shared by its GPUs. Prefix tn_pool_.
 *
 * Each GPU's thread submits a batch per shape (its candidates' NVRTC compiles) and waits for the
 * entries one by one, in order, as it verifies and times them. The pool's threads take the next
 * entry of the batches in turn, so while several GPUs tune, each gets an equal share of the CPUs,
 * and when one GPU is left on the last large shape, every CPU compiles for it (with threads fixed
 * per GPU it got CPUs / GPUs of them).
 *
 *     tn_pool *pool;
 *     tn_pool_create(16, &pool);
 *     tn_batch *b;
 *     tn_pool_submit(pool, n, wanted, compile_one, ctx, &b);   // compile_one(ctx, i) for wanted i
 *     for (i = 0; i < n; i++) { tn_batch_wait(b, i); ... }       // i done, or not wanted
 *     tn_batch_finish(b);    // no new entries; waits for those running
 *     tn_pool_destroy(pool);  // after every batch is finished
 *
 * run(ctx, i) is called at most once per wanted entry, from a pool thread, without the pool's
 * lock; entries not wanted are never run (a caller that later wants one runs it itself).
 */
#ifndef AT_TUNER_POOL_H
#define AT_TUNER_POOL_H

#include "attntune.h"

typedef struct tn_pool tn_pool;
typedef struct tn_batch tn_batch;

/* threads: 1..256 workers, started now. */
at_status tn_pool_create(int threads, tn_pool **out);
/* Stops and joins the workers; every batch must be finished first. NULL is a no-op. */
void tn_pool_destroy(tn_pool *pool);

/* A batch of n entries; wanted[i] != 0 marks the ones to run (copied). */
at_status tn_pool_submit(tn_pool *pool, int n, const char *wanted, void (*run)(void *ctx, int i), void *ctx,
                         tn_batch **out);
/* Until entry i has run (at once for an entry not wanted). */
void tn_batch_wait(tn_batch *b, int i);
/* Takes the batch's entries not yet started off the pool, waits for the running ones, frees it. */
void tn_batch_finish(tn_batch *b);

#endif
