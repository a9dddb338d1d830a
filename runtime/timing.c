/* timing.c — how every implementation is timed (rt.h, "timing"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void rt_timing_summarize(float *ms, int n, double scale, rt_timing *out)
{
  qsort(ms, (size_t)n, sizeof *ms, compare_float);
  out->min_ms = ms[0] * scale;
  out->max_ms = ms[n - 1] * scale;
  out->median_ms = (n % 2 ? ms[n / 2] : 0.5 * ((double)ms[n / 2 - 1] + ms[n / 2])) * scale;
}

/* Launches per captured graph, and how many replays are timed: about `reps` launches in all,
 * at least 5 replays so the median means something. */
enum { GRAPH_MAX_LAUNCHES = 20, GRAPH_MIN_REPLAYS = 5 };

/* Capture `per` launches (input sets rotating from `first`) into an executable graph. A failure
 * leaves the stream out of capture and nothing allocated. */
static at_status capture(rt_launch_fn launch, void *user, int n_sets, int first, int per, CUstream stream,
                         CUgraphExec *exec)
{
  const rt_driver *cu = rt_cu();
  CUgraph graph = NULL;
  at_status rc = RT_CU(cu->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  if (rc != AT_OK) return rc;
  for (int i = 0; i < per && rc == AT_OK; i++) rc = launch(user, (first + i) % n_sets, stream);
  at_status end = RT_CU(cu->cuStreamEndCapture(stream, &graph));
  if (rc == AT_OK) rc = end;
  if (rc == AT_OK) rc = RT_CU(cu->cuGraphInstantiate(exec, graph, 0));
  if (graph) cu->cuGraphDestroy(graph);
  return rc;
}

static at_status time_graph(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
                            rt_timing *out)
{
  const rt_driver *cu = rt_cu();
  const int reps = opts->reps > 0 ? opts->reps : 1;
  const int per = reps < GRAPH_MAX_LAUNCHES ? reps : GRAPH_MAX_LAUNCHES;
  int replays = (reps + per - 1) / per;
  if (replays < GRAPH_MIN_REPLAYS) replays = GRAPH_MIN_REPLAYS;
  CUstream stream = NULL;
  CUgraphExec exec = NULL;
  CUevent events[2] = {NULL, NULL};
  float *ms = calloc((size_t)replays, sizeof *ms);
  at_status rc = ms ? AT_OK : at_fail(AT_ERR_NOMEM, "no memory for %d timings", replays);
  if (rc == AT_OK) rc = RT_CU(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 2 && rc == AT_OK; i++) rc = RT_CU(cu->cuEventCreate(&events[i], CU_EVENT_DEFAULT));
  for (int i = 0; i < opts->warmup && rc == AT_OK; i++) rc = launch(user, i % n_sets, stream);
  if (rc == AT_OK) rc = RT_CU(cu->cuStreamSynchronize(stream));
  if (rc == AT_OK) rc = capture(launch, user, n_sets, opts->warmup, per, stream, &exec);
  if (rc == AT_OK) rc = RT_CU(cu->cuGraphLaunch(exec, stream)); /* the first replay uploads the graph */
  if (rc == AT_OK) rc = RT_CU(cu->cuStreamSynchronize(stream));
  for (int r = 0; r < replays && rc == AT_OK; r++) {
    if ((rc = RT_CU(cu->cuEventRecord(events[0], stream))) != AT_OK) break;
    if ((rc = RT_CU(cu->cuGraphLaunch(exec, stream))) != AT_OK) break;
    if ((rc = RT_CU(cu->cuEventRecord(events[1], stream))) != AT_OK) break;
    rc = rt_event_ms(events[0], events[1], &ms[r]); /* waits: a fault surfaces here */
  }
  if (rc == AT_OK) {
    rt_timing_summarize(ms, replays, 1.0 / per, out);
    out->reps = replays * per;
    out->graph = 1;
  }
  if (exec) cu->cuGraphExecDestroy(exec);
  for (int i = 0; i < 2; i++)
    if (events[i]) cu->cuEventDestroy(events[i]);
  if (stream) cu->cuStreamDestroy(stream);
  free(ms);
  return rc;
}

static at_status time_events(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
                             CUstream stream, rt_timing *out);

at_status rt_time_launches(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
                           CUstream stream, rt_timing *out)
{
  if (n_sets < 1) n_sets = 1;
  memset(out, 0, sizeof *out);
  if (opts->graph) {
    at_status rc = time_graph(launch, user, n_sets, opts, out);
    /* A launch that cannot be captured (an error inside capture) is timed with events instead;
     * a fault of the kernel itself is an error either way. */
    if (rc == AT_OK || rc == AT_ERR_NOMEM) return rc;
    char why[512];
    snprintf(why, sizeof why, "%s", at_last_error());
    at_status again = time_events(launch, user, n_sets, opts, stream, out);
    if (again != AT_OK) return at_fail_context(again, "graph replay failed (%s), then events", why);
    return AT_OK;
  }
  return time_events(launch, user, n_sets, opts, stream, out);
}

static at_status time_events(rt_launch_fn launch, void *user, int n_sets, const rt_timing_opts *opts,
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
  rt_timing_summarize(ms, reps, 1.0, out);
  out->reps = reps;
  out->graph = 0;
out:
  for (int i = 0; i < n_events; i++) cu->cuEventDestroy(events[i]);
  free(events);
  free(ms);
  return rc;
}
