/*
 * testutil.h — helpers for the cmocka tests: running a test group so that ctest sees skips,
 * seeding random inputs so that a failure can be replayed, opening a GPU (or learning there is
 * none), moving fp32 host data to and from the device in a given dtype, and poisoning outputs.
 * Include after <setjmp.h>, <stdarg.h>, <stddef.h>, <stdint.h> and <cmocka.h>.
 */
#ifndef AT_TESTS_TESTUTIL_H
#define AT_TESTS_TESTUTIL_H

#include "cache/cache.h"
#include "generator/generator.h"
#include "runtime/rt.h"
#include "tuner/reference.h"

/* Runs a group as cmocka_run_group_tests does and returns the program's exit code: the number
 * of failed tests; or TU_SKIPPED (ctest's SKIP_RETURN_CODE) when none failed and every test
 * skipped, so that ctest lists a GPU program on a machine without a GPU as skipped, not passed
 * (cmocka itself returns 0 for skips). A group with some tests passed and some skipped is 0. */
enum { TU_SKIPPED = 77 };
int tu_run_group(const char *group, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                 CMFixtureFunction teardown);
#define TU_RUN_GROUP(tests, setup, teardown) \
  tu_run_group(__FILE__, (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))

/* The seed of this program's random inputs: ATTNTUNE_TEST_SEED when set (to replay a failure),
 * else a fresh one. The first call prints it on stderr with the line that replays it; a value
 * that is not an unsigned integer ends the program with a message. Thread-safe. */
uint64_t tu_seed(void);
/* A generator for one stream of inputs: the program's seed mixed with stream, so cases (or
 * threads) numbered alike draw the same inputs again when the seed is replayed. */
tn_rng tu_rng_for(uint64_t stream);
/* tu_rng_for of a counter that each call advances: the streams of a program whose cases run
 * in a fixed order (one thread) replay in that order. */
tn_rng tu_rng(void);
/* The next such stream as a seed, for functions that take one (tn_harness_open). */
uint64_t tu_next_seed(void);

/* Opens GPU 0 into *ctx. Returns 1 on success; 0 when there is no driver or GPU (the reason is
 * printed once), after which the caller should skip(). Any other failure fails the test. */
int tu_open_gpu(rt_ctx *ctx);

/* Group setup and teardown of GPU test programs: GPU 0 opened into tu_gpu, or tu_have_gpu 0 when
 * there is none (the tests then skip()). */
extern rt_ctx tu_gpu;
extern int tu_have_gpu;
int tu_gpu_setup(void **state);
int tu_gpu_teardown(void **state);

/* Fails the current test with at_last_error() when rc is not AT_OK. */
#define TU_OK(expr)                                                                              \
  do {                                                                                           \
    at_status tu_rc_ = (expr);                                                                   \
    if (tu_rc_ != AT_OK) fail_msg("%s -> %s: %s", #expr, at_status_name(tu_rc_), at_last_error()); \
  } while (0)

/* A device buffer holding n elements of dtype, uploaded from fp32 values (packed to the dtype). */
CUdeviceptr tu_upload(at_dtype dtype, const float *host, size_t n);
/* Download n elements of dtype into fp32. */
void tu_download(at_dtype dtype, CUdeviceptr dev, size_t n, float *host);
/* A device buffer of bytes, every byte 0xFF: NaN in f32, f16 and bf16 alike. */
CUdeviceptr tu_alloc_poisoned(size_t bytes);

/* Run the attntune binary of this build (next to the tests' folder) with args, through the
 * shell; its stdout and stderr land in output (scratch file in dir). Returns the exit code. */
/* Compiles the n variants with NVRTC (no GPU needed) and prints one line about them (what, their
 * register range, the NVRTC time) and a line for each that failed, spilled or used a stack;
 * returns how many did. */
int tu_compile_count_bad(const gen_variant *vs, int n, const gen_target *t, const char *what);
/* The environment of an H200 (driver 580.159.04, NVRTC 13.0, cuDNN 9.19.0) with these template
 * versions, for cache rows written by the tests. */
cache_env tu_h200_env(const char *templates);
/* The sm_90a target the generator tests build for (its opt-in shared memory limit). */
gen_target tu_sm90(void);
/* Fails unless rc is want and the last error's message contains word; prints the message. */
void tu_expect_refused(at_status rc, at_status want, const char *word);
/* A variant's scratch for one launch of shape (0 where it needs none): allocated and zeroed by
 * the runtime, then its fp32 partials poisoned (0xFF: NaN), its split counters left at 0. */
CUdeviceptr tu_variant_scratch(const gen_variant *v, const at_shape *shape);
/* After a launch: the counters of a last-CTA merge are back at 0 (the next launch needs that);
 * frees the scratch. */
void tu_variant_scratch_done(const gen_variant *v, const at_shape *shape, CUdeviceptr scratch);
int tu_run_attntune(const char *args, const char *dir, char *output, size_t size);

/* Checks one loaded variant (index i of the list): poison, launch, compare. Returns 0 when it is
 * right, else 1 after printing why. */
typedef int (*tu_variant_check)(const rt_variant *lv, const char *key, int i, void *ctx);

/* Compiles every variant for target and runs check on each that compiled, with its module loaded
 * (and unloaded after). A variant that does not compile is printed and counts as a failure.
 * Returns the number of failures. */
int tu_check_variants(const gen_variant *vs, int n, const gen_target *target, tu_variant_check check,
                      void *ctx);

/* One FP8 input tensor: random values in [-magnitude, magnitude) quantized per tensor
 * (at_quantize_fp8), its codes on the device, the descale, and the dequantized values on the
 * host (what the references compute with). */
typedef struct tu_fp8_tensor {
  uint8_t *codes;
  float *deq;
  float descale;
  CUdeviceptr dev;
} tu_fp8_tensor;
tu_fp8_tensor tu_fp8_tensor_make(tn_rng *rng, at_dtype fp8, size_t n, float magnitude);
/* The same from given values (quantized per tensor). */
tu_fp8_tensor tu_fp8_tensor_from(const float *real, at_dtype fp8, size_t n);
void tu_fp8_tensor_free(tu_fp8_tensor *x);

/* Keys whose scores move a row's max late in the row, for the kernels that guess it
 * (templates/fa3.cu, "Speculative row max"). TU_KEYS_RISING scales key j by 1 + 3j/S, so the
 * max keeps rising tile after tile; TU_KEYS_SPIKE also sets key 7S/8 of each (batch, KV head)
 * to a multiple of the first query row of the group's first head, so that row scores 90
 * (q.k / sqrt(D)) there, far above any score before it; TU_KEYS_HUGE makes that score 1e7, past
 * the range of fa3's linear-P reference (fa3_lin_ref: about 7e5 octaves), and sends the other
 * rows of the group scores of some 1e6 either way. q [B][T][Nq][D], k [B][S][Nkv][D]. */
typedef enum tu_keys { TU_KEYS_RANDOM, TU_KEYS_RISING, TU_KEYS_SPIKE, TU_KEYS_HUGE } tu_keys;
void tu_shape_keys(tu_keys how, float *k, const float *q, int b, int t, int s, int nq, int nkv, int d);
/* Download n fp32 values into doubles (a reference's output). */
void tu_download_f64(CUdeviceptr dev, size_t n, double *host);

/* Random fp32 values in [-1, 1), rounded to what dtype holds; the caller frees. */
float *tu_random_tensor(tn_rng *rng, at_dtype dtype, size_t n);

/* The whole file, malloc'd and NUL-terminated (*size bytes before the NUL); NULL when missing. */
char *tu_slurp(const char *path, size_t *size);
/* Fails unless path holds exactly before's n bytes and no -wal, -shm or -journal file appeared
 * beside it (a refused cache must be left as it was). */
void tu_assert_file_unchanged(const char *path, const char *before, size_t n);

/* Runs fn(arg) in a child process as a user who cannot write dir: uid and gid 65534 (nobody)
 * when this process is root, else this user with dir at mode 0555 (the caller's chmod). Returns
 * fn's result, or 77 when no such user could be had (the caller skips). */
int tu_without_write_access(const char *dir, int (*fn)(void *), void *arg);

#endif
