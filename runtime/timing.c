/* timing.c — how every implementation is timed (rt.h, "timing"). */
#include <stdlib.h>

#include "runtime/rt.h"

static int compare_float(const void *a, const void *b)
{
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

int rt_rotation_sets(size_t bytes, size_t l2_bytes, int max_sets)
{
  if (bytes == 0) return 1;
  size_t want = (2 * l2_bytes + bytes - 1) / bytes;
  if (want < 1) want = 1;
  return want > (size_t)max_sets ? max_sets : (int)want;
}

at_status rt_time_launches(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
                           CUstream stream, rt_timing *out)
{
  const rt_driver *cu = rt_cu();
  const int reps = opts->reps > 0 ? opts->reps : 1;
  CUevent *events = calloc((size_t)reps + 1, sizeof *events);
  float *ms = calloc((size_t)reps, sizeof *ms);
  at_status rc = AT_OK;
  int n_events = 0;
  if (!events || !ms) {
    rc = at_fail(AT_ERR_NOMEM, "no memory for %d timing events", reps);
    goto out;
  }
  if (n_sets < 1) n_sets = 1;
  for (; n_events < reps + 1; n_events++)
    if ((rc = RT_CU(cu->cuEventCreate(&events[n_events], CU_EVENT_DEFAULT))) != AT_OK) goto out;
  for (int i = 0; i < opts->warmup; i++)
    if ((rc = launch(user, i % n_sets, stream)) != AT_OK) goto out;
  if ((rc = RT_CU(cu->cuStreamSynchronize(stream))) != AT_OK) goto out;
  for (int i = 0; opts->cover && i < 8; i++)
    if ((rc = RT_CU(cu->cuMemsetD32Async(opts->cover, (unsigned)i, opts->cover_words, stream))) != AT_OK)
      goto out;
  if ((rc = RT_CU(cu->cuEventRecord(events[0], stream))) != AT_OK) goto out;
  for (int i = 0; i < reps; i++) {
    if ((rc = launch(user, (opts->warmup + i) % n_sets, stream)) != AT_OK) goto out;
    if ((rc = RT_CU(cu->cuEventRecord(events[i + 1], stream))) != AT_OK) goto out;
  }
  /* A fault in any launch surfaces here, before any number is read. */
  if ((rc = RT_CU(cu->cuStreamSynchronize(stream))) != AT_OK) goto out;
  for (int i = 0; i < reps; i++)
    if ((rc = rt_event_ms(events[i], events[i + 1], &ms[i])) != AT_OK) goto out;
  qsort(ms, (size_t)reps, sizeof *ms, compare_float);
  out->reps = reps;
  out->min_ms = ms[0];
  out->max_ms = ms[reps - 1];
  out->median_ms = reps % 2 ? ms[reps / 2] : 0.5 * ((double)ms[reps / 2 - 1] + ms[reps / 2]);
out:
  for (int i = 0; i < n_events; i++) cu->cuEventDestroy(events[i]);
  free(events);
  free(ms);
  return rc;
}
