/* worker.c — the worker process and the parent's handle on it; see worker.h. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api_internal.h"
#include "runtime/cudnn_sdpa.h"
#include "tuner/bench_serving.h"
#include "tuner/harness.h"
#include "tuner/worker.h"

#define TN_WORKER_MAGIC 0x61747775u /* "atwu" */

/* ---- byte pipes ---------------------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

/* Read exactly n bytes; 0 ok, -1 EOF or error, -2 deadline passed (deadline_ms < 0: none). */
static int read_all(int fd, void *buf, size_t n, long long deadline_ms)
{
  char *p = buf;
  while (n > 0) {
    if (deadline_ms >= 0) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long long left = deadline_ms - (now.tv_sec * 1000LL + now.tv_nsec / 1000000);
      if (left <= 0) return -2;
      struct pollfd pfd = {fd, POLLIN, 0};
      int r = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue; /* recheck the deadline */
      if (r < 0) return -1;
    }
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    p += got, n -= (size_t)got;
  }
  return 0;
}

static long long now_ms(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000LL + now.tv_nsec / 1000000;
}

/* ---- parent side ------------------------------------------------------------------------------ */

at_status tn_worker_start(tn_worker *w, const char *exe, int device)
{
  int to_child[2], from_child[2];
  memset(w, 0, sizeof *w);
  w->device = device;
  snprintf(w->exe, sizeof w->exe, "%s", exe);
  signal(SIGPIPE, SIG_IGN); /* a dead worker shows up as EPIPE, not as our death */
  if (pipe(to_child) != 0) return at_fail(AT_ERR_IO, "pipe: %s", strerror(errno));
  if (pipe(from_child) != 0) {
    close(to_child[0]), close(to_child[1]);
    return at_fail(AT_ERR_IO, "pipe: %s", strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(to_child[0]), close(to_child[1]), close(from_child[0]), close(from_child[1]);
    return at_fail(AT_ERR_IO, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    char dev[16];
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[0]), close(to_child[1]), close(from_child[0]), close(from_child[1]);
    snprintf(dev, sizeof dev, "%d", device);
    execl(exe, exe, "__worker", dev, (char *)NULL);
    fprintf(stderr, "attntune: cannot start the worker %s: %s\n", exe, strerror(errno));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  fcntl(to_child[1], F_SETFD, FD_CLOEXEC);
  fcntl(from_child[0], F_SETFD, FD_CLOEXEC);
  w->pid = pid;
  w->to_fd = to_child[1];
  w->from_fd = from_child[0];
  return AT_OK;
}

/* How the worker ended, for the trial's message. */
static void describe_exit(pid_t pid, char *buf, size_t size)
{
  int status = 0;
  pid_t r = waitpid(pid, &status, 0);
  if (r != pid) snprintf(buf, size, "worker vanished");
  else if (WIFSIGNALED(status)) snprintf(buf, size, "worker killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else snprintf(buf, size, "worker exited with code %d", WEXITSTATUS(status));
}

void tn_worker_stop(tn_worker *w)
{
  if (w->pid > 0) {
    kill(w->pid, SIGKILL);
    waitpid(w->pid, NULL, 0);
  }
  if (w->to_fd > 0) close(w->to_fd);
  if (w->from_fd > 0) close(w->from_fd);
  w->pid = 0;
  w->to_fd = w->from_fd = -1;
}

at_status tn_worker_call(tn_worker *w, const tn_request *req_in, const void *cubin, tn_response *resp,
                         int timeout_ms)
{
  tn_request req = *req_in;
  memset(resp, 0, sizeof *resp);
  resp->time_ms = resp->err_naive = resp->err_cudnn = NAN;
  if (w->pid <= 0) return at_fail(AT_ERR_INVALID, "worker for GPU %d is not running", w->device);
  req.magic = TN_WORKER_MAGIC;
  int sent = write_all(w->to_fd, &req, sizeof req) == 0 &&
             (req.cubin_size == 0 || write_all(w->to_fd, cubin, req.cubin_size) == 0);
  int got = sent ? read_all(w->from_fd, resp, sizeof *resp, now_ms() + timeout_ms) : -1;
  if (got == 0 && resp->magic == TN_WORKER_MAGIC) return AT_OK;
  char why[160];
  if (got == -2) {
    kill(w->pid, SIGKILL);
    describe_exit(w->pid, why, sizeof why);
    resp->status = CACHE_TIMEOUT;
    snprintf(resp->message, sizeof resp->message, "no answer within %d ms (watchdog); %s", timeout_ms, why);
  } else {
    kill(w->pid, SIGKILL); /* a garbled answer: do not trust this worker either */
    describe_exit(w->pid, why, sizeof why);
    resp->status = CACHE_CRASHED;
    snprintf(resp->message, sizeof resp->message, "%s", why);
  }
  w->pid = 0;
  close(w->to_fd), close(w->from_fd);
  w->to_fd = w->from_fd = -1;
  resp->rc = AT_ERR_CUDA;
  return at_fail(AT_ERR_CUDA, "GPU %d worker: %s", w->device, resp->message);
}

/* ---- worker side -------------------------------------------------------------------------- */

typedef struct serve_state {
  int device;
  rt_ctx ctx;
  at_status ctx_rc;
  char ctx_message[512];
  tn_harness h;
  int have_shape;
  int cudnn_ok; /* cuDNN ran and passed on the current shape */
  tn_impl cudnn;
  /* A ragged or paged shape: the library's plans on the batch's buffers (bench_serving.h). */
  int serving;
  at_context *actx; /* made on the first serving shape, on the device's primary context */
  tn_serving_bench batch;
  tn_serving_buffers buffers;
  tn_serving_ref ref;  /* the naive kernels' output on the buffers, on the device */
  at_plan *cudnn_plan; /* cuDNN's ragged graph, verified (cudnn_ok) */
} serve_state;

static void fill_env(serve_state *st, tn_response *r)
{
  const rt_device_info *d = &st->ctx.info;
  snprintf(r->env.gpu_model, sizeof r->env.gpu_model, "%.127s", d->name);
  snprintf(r->device_name, sizeof r->device_name, "%s", d->name);
  r->env.cc_major = d->cc_major, r->env.cc_minor = d->cc_minor, r->env.sm_count = d->sm_count;
  rt_driver_release(r->env.driver, sizeof r->env.driver);
  rt_nvrtc_version_text(r->env.nvrtc, sizeof r->env.nvrtc);
  rt_cudnn_version_text(r->env.cudnn, sizeof r->env.cudnn);
  r->smem_optin = d->smem_per_block_optin;
  snprintf(r->arch, sizeof r->arch, "%s", st->ctx.arch);
}

static void set_message(tn_response *r, const char *text)
{
  snprintf(r->message, sizeof r->message, "%s", text);
}

static void close_serving(serve_state *st)
{
  if (!st->serving) return;
  at_plan_destroy(st->cudnn_plan);
  tn_serving_buffers_free(st->actx, &st->buffers);
  tn_serving_reference_free(st->actx, &st->ref);
  st->cudnn_plan = NULL, st->serving = 0;
  memset(&st->buffers, 0, sizeof st->buffers);
}

static void close_shape(serve_state *st)
{
  close_serving(st);
  if (st->cudnn_ok || st->cudnn.kind == TN_IMPL_CUDNN) tn_impl_close(&st->cudnn);
  if (st->have_shape) tn_harness_close(&st->h);
  st->have_shape = st->cudnn_ok = 0;
  memset(&st->cudnn, 0, sizeof st->cudnn);
}

/* What the message of cuDNN's trial says after its plan: for FP8, that it writes FP8 output and
 * how that output was read for the comparisons. */
static void describe_cudnn(const serve_state *st, const rt_cudnn_plan_info *info, tn_response *r)
{
  rt_cudnn_plan_info_format(info, r->message, sizeof r->message);
  if (st->cudnn.out_dtype == st->h.shape.dtype && at_dtype_is_fp8(st->h.shape.dtype)) {
    size_t used = strlen(r->message);
    snprintf(r->message + used, sizeof r->message - used, "; writes %s output (O x %g), decoded x 1/%g for the "
             "comparisons", at_dtype_name(st->h.shape.dtype), 1.0 / st->cudnn.out_descale, 1.0 / st->cudnn.out_descale);
  }
}

/* ---- ragged and paged shapes: the library's serving plans, as bench runs them ------------------- */

/* The response of a plan that failed: crashed for a CUDA fault (the context is gone), else
 * unsupported (the library declined it). Returns 0 when the worker must exit. */
static int serving_failure(tn_response *r, at_status rc)
{
  r->rc = rc;
  r->status = rc == AT_ERR_CUDA ? CACHE_CRASHED : CACHE_UNSUPPORTED;
  set_message(r, at_last_error());
  return rc != AT_ERR_CUDA;
}

/* Plan impl for the batch and check it once against the reference: *plan kept when it passed
 * (r->status CACHE_OK), destroyed otherwise. Returns 0 when the worker must exit. */
static int plan_checked(serve_state *st, const char *impl, double tolerance, tn_response *r, at_plan **plan)
{
  at_plan_options opts = {impl};
  *plan = NULL;
  at_status rc = at_plan_create_serving(st->actx, &st->batch.shape, &st->batch.layout, &opts, plan);
  if (rc == AT_OK) rc = tn_serving_run_checked(st->actx, &st->batch, &st->buffers, *plan, &st->ref, &r->err_naive);
  if (rc != AT_OK) {
    at_plan_destroy(*plan), *plan = NULL;
    return serving_failure(r, rc);
  }
  if (!(r->err_naive <= tolerance)) {
    r->status = CACHE_WRONG;
    snprintf(r->message, sizeof r->message, "error vs naive %.3g over tolerance %.3g on the %s batch", r->err_naive,
             tolerance, at_seq_layout_name(st->batch.layout.q_layout));
    at_plan_destroy(*plan), *plan = NULL;
    return 1;
  }
  r->status = CACHE_OK;
  return 1;
}

/* SHAPE of a ragged or paged shape: the batch's buffers, the naive reference on them, and cuDNN's
 * ragged graph verified where it runs the layout (else unsupported, with its reason). */
static int serve_serving_shape(serve_state *st, const tn_request *q, tn_response *r)
{
  at_status rc = st->actx ? AT_OK : at_context_create(st->device, NULL, 0, &st->actx);
  if (rc != AT_OK) return r->rc = rc, set_message(r, at_last_error()), rc != AT_ERR_CUDA;
  tn_serving_bench *b = &st->batch;
  memset(b, 0, sizeof *b);
  b->shape = q->shape, b->layout = q->layout, b->seed = q->seed, b->device = st->device;
  memcpy(b->q_lens, q->q_lens, (size_t)q->shape.batch * sizeof *b->q_lens);
  memcpy(b->kv_lens, q->kv_lens, (size_t)q->shape.batch * sizeof *b->kv_lens);
  st->serving = 1;
  rc = tn_serving_buffers_make(st->actx, b, &st->buffers);
  if (rc == AT_OK) rc = tn_serving_reference(st->actx, b, &st->buffers, &st->ref);
  r->rc = rc;
  if (rc != AT_OK) return set_message(r, at_last_error()), rc != AT_ERR_CUDA;
  char why[256];
  if (!rt_cudnn_serving_supported(&b->shape, &b->layout, why, sizeof why)) {
    r->status = CACHE_UNSUPPORTED;
    set_message(r, why);
    return 1;
  }
  int keep_going = plan_checked(st, "cudnn", q->tolerance, r, &st->cudnn_plan);
  r->rc = AT_OK; /* cuDNN declining the shape does not fail SHAPE */
  st->cudnn_ok = r->status == CACHE_OK;
  if (st->cudnn_ok)
    set_message(r, b->layout.kv_layout == AT_SEQ_PAGED ? "cuDNN's paged graph, with its length and fix-up kernels"
                                                        : "cuDNN's ragged graph, with its offsets and fix-up kernels");
  return keep_going;
}

static int serve_serving_time(serve_state *st, at_plan *plan, const tn_request *q, tn_response *r)
{
  at_fp8_args a;
  double ms = 0;
  at_status rc = at_plan_benchmark_serving(plan, &st->buffers.t, tn_serving_fp8_args(&st->batch.shape, &st->buffers, &a),
                                           q->timing.warmup, q->timing.reps, &ms);
  if (rc != AT_OK) return serving_failure(r, rc);
  r->rc = AT_OK, r->status = CACHE_OK, r->time_ms = ms, r->reps = q->timing.reps;
  return 1;
}

/* VARIANT of a serving shape: the library plans the key from the cubin the parent compiled
 * (adopted into the context's module table: a key's cubin is the same for every shape), then
 * verify and time. ATTNTUNE_FAULT's hang applies; its crash and NaN faults are the padded
 * harness's (tn_impl) and do not. */
static int serve_serving_variant(serve_state *st, const tn_request *q, const void *cubin, tn_response *r)
{
  at_plan *plan = NULL;
  if (q->fault == TN_FAULT_HANG)
    for (;;) pause(); /* only the parent's watchdog ends this */
  if (cubin && q->cubin_size) {
    at_status rc = rt_context_adopt_cubin(st->actx, q->key, cubin);
    if (rc != AT_OK) return serving_failure(r, rc);
  }
  int keep_going = plan_checked(st, q->key, q->tolerance, r, &plan);
  if (keep_going && r->status == CACHE_OK) keep_going = serve_serving_time(st, plan, q, r);
  at_plan_destroy(plan);
  return keep_going;
}

/* Inputs and the naive reference; then cuDNN, verified, as the second yardstick (FP8 too: its FP8
 * graph, FP8 output decoded, the same tolerance; harness.h). The response's
 * status/err_naive/message describe cuDNN. Returns 0 when the worker must exit. */
static int serve_shape(serve_state *st, const tn_request *q, tn_response *r)
{
  close_shape(st);
  if (q->layout.struct_size && !at_serving_is_padded(&q->layout)) return serve_serving_shape(st, q, r);
  at_status rc = tn_harness_open(&st->h, &st->ctx, &q->shape, q->seed);
  if (rc == AT_OK) {
    st->have_shape = 1;
    rc = tn_harness_make_reference(&st->h);
  }
  r->rc = rc;
  if (rc != AT_OK) {
    set_message(r, at_last_error());
    return rc != AT_ERR_CUDA;
  }
  rt_cudnn_plan_info info;
  if (q->shape.dtype == AT_DTYPE_F32) {
    r->status = CACHE_UNSUPPORTED;
    set_message(r, TN_F32_NO_CUDNN);
    return 1;
  }
  if (at_shape_kv_dtype(&q->shape) != q->shape.dtype) {
    r->status = CACHE_UNSUPPORTED;
    set_message(r, TN_KV8_NO_CUDNN);
    return 1;
  }
  rc = tn_impl_cudnn(&st->h, RT_CUDNN_PATH_COMPOSITE, &st->cudnn, &info);
  if (rc == AT_OK) rc = tn_harness_verify(&st->h, &st->cudnn, &r->err_naive, &r->err_cudnn);
  if (rc != AT_OK) {
    r->status = rc == AT_ERR_CUDA ? CACHE_CRASHED : CACHE_UNSUPPORTED;
    set_message(r, at_last_error());
    return rc != AT_ERR_CUDA;
  }
  if (!(r->err_naive <= q->tolerance)) {
    r->status = CACHE_WRONG;
    snprintf(r->message, sizeof r->message, "cuDNN's error vs naive %.3g over %.3g", r->err_naive, q->tolerance);
    return 1;
  }
  if ((rc = tn_harness_keep_cudnn_output(&st->h, &st->cudnn)) != AT_OK) {
    r->status = CACHE_CRASHED;
    set_message(r, at_last_error());
    return 0;
  }
  st->cudnn_ok = 1;
  r->status = CACHE_OK;
  describe_cudnn(st, &info, r);
  return 1;
}

static int serve_cudnn(serve_state *st, const tn_request *q, tn_response *r)
{
  rt_timing tm;
  if (!st->cudnn_ok) {
    r->rc = AT_ERR_UNSUPPORTED;
    r->status = CACHE_UNSUPPORTED;
    set_message(r, "cuDNN did not pass on this shape");
    return 1;
  }
  if (st->serving) return serve_serving_time(st, st->cudnn_plan, q, r);
  at_status rc = tn_harness_time(&st->h, &st->cudnn, &q->timing, &tm);
  r->rc = rc;
  if (rc != AT_OK) {
    r->status = CACHE_CRASHED;
    set_message(r, at_last_error());
    return rc != AT_ERR_CUDA;
  }
  r->status = CACHE_OK;
  r->time_ms = tm.median_ms;
  r->reps = tm.reps;
  return 1;
}

static int serve_naive(serve_state *st, const tn_request *q, tn_response *r)
{
  tn_impl impl;
  rt_timing tm;
  memset(&impl, 0, sizeof impl);
  at_status rc = st->have_shape ? tn_impl_naive(&st->h, &impl) : at_fail(AT_ERR_INVALID, "NAIVE before SHAPE");
  if (rc == AT_OK) rc = tn_harness_verify(&st->h, &impl, &r->err_naive, &r->err_cudnn);
  if (rc == AT_OK && !(r->err_naive <= q->tolerance)) {
    r->status = CACHE_WRONG;
    snprintf(r->message, sizeof r->message, "naive output vs the fp32 reference %.3g over %.3g", r->err_naive, q->tolerance);
  } else if (rc == AT_OK && (rc = tn_harness_time(&st->h, &impl, &q->timing, &tm)) == AT_OK) {
    r->status = CACHE_OK, r->time_ms = tm.median_ms, r->reps = tm.reps;
    set_message(r, "scores, softmax, PV: 3 kernels");
  }
  if (rc != AT_OK) {
    r->status = rc == AT_ERR_CUDA ? CACHE_CRASHED : CACHE_UNSUPPORTED;
    set_message(r, at_last_error());
  }
  r->rc = rc;
  if (impl.kind == TN_IMPL_NAIVE) tn_impl_close(&impl);
  return rc != AT_ERR_CUDA;
}

static int serve_variant(serve_state *st, const tn_request *q, const void *cubin, tn_response *r)
{
  gen_variant v;
  tn_impl impl;
  rt_timing tm;
  memset(&impl, 0, sizeof impl);
  if (st->serving) return serve_serving_variant(st, q, cubin, r);
  if (!st->have_shape) {
    r->rc = AT_ERR_INVALID;
    set_message(r, "VARIANT before SHAPE");
    return 1;
  }
  at_status rc = gen_variant_parse(q->key, &v);
  if (rc == AT_OK) rc = tn_impl_variant(&st->h, &v, cubin, &impl);
  if (rc != AT_OK) {
    r->rc = rc;
    r->status = rc == AT_ERR_CUDA ? CACHE_CRASHED : CACHE_UNSUPPORTED;
    set_message(r, at_last_error());
    tn_impl_close(&impl);
    return rc != AT_ERR_CUDA;
  }
  if (q->fault == TN_FAULT_HANG)
    for (;;) pause(); /* only the parent's watchdog ends this */
  impl.fault = (tn_fault)q->fault;
  rc = tn_harness_verify(&st->h, &impl, &r->err_naive, &r->err_cudnn);
  if (rc == AT_OK && !(r->err_naive <= q->tolerance)) {
    r->status = CACHE_WRONG;
    snprintf(r->message, sizeof r->message, "error vs naive %.3g over tolerance %.3g%s", r->err_naive,
             q->tolerance, isnan(r->err_naive) || isinf(r->err_naive) ? " (NaN or unwritten output)" : "");
  } else if (rc == AT_OK) {
    rc = tn_harness_time(&st->h, &impl, &q->timing, &tm);
    if (rc == AT_OK) r->status = CACHE_OK, r->time_ms = tm.median_ms, r->reps = tm.reps;
  }
  if (rc != AT_OK) {
    r->status = rc == AT_ERR_CUDA ? CACHE_CRASHED : CACHE_UNSUPPORTED;
    set_message(r, at_last_error());
  }
  r->rc = rc;
  if (rc != AT_ERR_CUDA) tn_impl_close(&impl);
  return rc != AT_ERR_CUDA; /* after a fault the context is gone: exit, the parent restarts us */
}

int tn_worker_serve(int device, int in_fd, int out_fd)
{
  serve_state st;
  memset(&st, 0, sizeof st);
  st.device = device;
  signal(SIGINT, SIG_IGN); /* Ctrl-C is the parent's: it lets the trial in flight finish */
  st.ctx_rc = rt_ctx_open(device, &st.ctx);
  if (st.ctx_rc != AT_OK) snprintf(st.ctx_message, sizeof st.ctx_message, "%s", at_last_error());
  for (;;) {
    tn_request q;
    tn_response r;
    void *cubin = NULL;
    if (read_all(in_fd, &q, sizeof q, -1) != 0) break;
    if (q.magic != TN_WORKER_MAGIC || q.cubin_size > (1u << 30)) {
      fprintf(stderr, "attntune worker: malformed request\n");
      return 2;
    }
    if (q.cubin_size) {
      cubin = malloc(q.cubin_size);
      if (!cubin || read_all(in_fd, cubin, q.cubin_size, -1) != 0) return 2;
    }
    memset(&r, 0, sizeof r);
    r.magic = TN_WORKER_MAGIC;
    r.time_ms = r.err_naive = r.err_cudnn = NAN;
    int keep_going = 1;
    if (q.kind == TN_REQ_QUIT) {
      free(cubin);
      break;
    } else if (st.ctx_rc != AT_OK) {
      r.rc = st.ctx_rc;
      set_message(&r, st.ctx_message);
    } else if (q.kind == TN_REQ_INFO) {
      fill_env(&st, &r);
    } else if (q.kind == TN_REQ_SHAPE) {
      keep_going = serve_shape(&st, &q, &r);
    } else if (q.kind == TN_REQ_CUDNN) {
      keep_going = serve_cudnn(&st, &q, &r);
    } else if (q.kind == TN_REQ_NAIVE) {
      keep_going = serve_naive(&st, &q, &r);
    } else if (q.kind == TN_REQ_VARIANT) {
      keep_going = serve_variant(&st, &q, cubin, &r);
    } else {
      r.rc = AT_ERR_INVALID;
      set_message(&r, "unknown request");
    }
    free(cubin);
    if (write_all(out_fd, &r, sizeof r) != 0) return 1;
    if (!keep_going) return 3;
  }
  if (st.ctx_rc == AT_OK) {
    close_shape(&st);
    at_context_destroy(st.actx);
    rt_ctx_close(&st.ctx);
  }
  return 0;
}
