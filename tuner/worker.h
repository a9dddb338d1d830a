/*
 * worker.h — GPU work in a separate process, so that a kernel that faults or hangs costs one
 * trial, not the tuning run. Prefix tn_worker_.
 *
 * The parent starts `attntune __worker DEVICE` with pipes on its stdin and stdout and sends
 * requests; the worker holds the CUDA context, the inputs and references of the current shape,
 * and answers each request. The parent never initializes CUDA itself (a forked CUDA context is
 * unusable), and NVRTC compiles in the parent, where it needs no GPU.
 *
 *   parent                                worker
 *   INFO                            ->    device, driver, NVRTC, cuDNN versions
 *   SHAPE (shape, seed)             ->    fresh inputs, naive reference
 *   CUDNN (timing)                  ->    verify, keep output as the cuDNN yardstick, time
 *   VARIANT (key, cubin, timing)    ->    load, verify, time (a serving shape's: planned by key
 *                                         through the library, which takes the parent's cubin)
 *   NAIVE (timing)                  ->    verify and time the naive path
 *   QUIT                            ->    exit 0
 *
 * A worker whose kernel faulted answers CRASHED and exits (its context is lost). If it dies
 * without answering the parent records CRASHED; if it does not answer within the watchdog's time
 * the parent kills it and records TIMEOUT. Either way the parent starts a new worker.
 */
#ifndef AT_TUNER_WORKER_H
#define AT_TUNER_WORKER_H

#include <stdint.h>
#include <sys/types.h>

#include "cache/cache.h"
#include "generator/generator.h"
#include "tuner/bench_serving.h"
#include "tuner/harness.h"

typedef enum tn_request_kind {
  TN_REQ_INFO = 1,
  TN_REQ_SHAPE,
  TN_REQ_CUDNN,
  TN_REQ_VARIANT,
  TN_REQ_NAIVE, /* time the naive kernels (output in the input dtype), the codelab's baseline */
  TN_REQ_QUIT,
} tn_request_kind;

typedef struct tn_request {
  uint32_t magic;
  uint32_t kind;
  at_shape shape;
  unsigned long long seed;
  rt_timing_opts timing;
  double tolerance;
  char key[GEN_KEY_MAX]; /* VARIANT */
  uint64_t cubin_size;   /* VARIANT: this many bytes follow the request */
  int32_t fault;         /* test hook: a tn_fault */
  /* SHAPE of a ragged or paged shape: its layout and lengths (shape.batch of each; T_b is q_len for
   * padded Q). The worker then runs the public library's serving plans on the batch's buffers as
   * `bench --lengths / --page-size` does (bench_serving.h); padded: a zeroed layout. */
  at_serving_layout layout;
  int32_t q_lens[TN_SERVING_MAX_BATCH], kv_lens[TN_SERVING_MAX_BATCH];
} tn_request;

typedef struct tn_response {
  uint32_t magic;
  int32_t rc;            /* at_status of the request as a whole */
  int32_t status;        /* cache_status of a CUDNN or VARIANT trial */
  double time_ms, err_naive, err_cudnn;
  int32_t reps;
  char message[512];
  /* INFO */
  cache_env env;
  int32_t smem_optin;
  char arch[16];
  char device_name[256];
} tn_response;

typedef struct tn_worker {
  pid_t pid;
  int to_fd, from_fd;
  int device;
  char exe[1024];
} tn_worker;

/* Start a worker for device (exe: the attntune binary, usually /proc/self/exe). */
at_status tn_worker_start(tn_worker *w, const char *exe, int device);
/* Kill (if running) and reap. */
void tn_worker_stop(tn_worker *w);
/* Send a request (and cubin bytes for VARIANT) and wait up to timeout_ms for the answer.
 * AT_OK with *resp filled when it answered. When it died: AT_ERR_CUDA, resp->status CRASHED;
 * when it did not answer in time: AT_ERR_CUDA, resp->status TIMEOUT, worker killed. In both
 * cases w->pid is 0 afterwards and the caller restarts it. */
at_status tn_worker_call(tn_worker *w, const tn_request *req, const void *cubin, tn_response *resp,
                         int timeout_ms);

/* The worker's side: serve requests on fds in and out until QUIT or EOF. Returns an exit code. */
int tn_worker_serve(int device, int in_fd, int out_fd);

#endif
