/* test_nvrtc.c — NVRTC compiles the naive kernels, the output comparison (templates/compare.cu)
 * and the metadata kernels of cuDNN's ragged graph (templates/cudnn_ragged.cu) for sm_80 and
 * sm_90a with no GPU present. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cudnn_ragged.h"
#include "tests/testutil.h"

static void compile_naive_kv(const char *arch, at_dtype in, at_dtype kv, at_dtype out)
{
  char *source = NULL;
  rt_binary bin;
  TU_OK(rt_naive_source_kv(in, kv, out, &source));
  TU_OK(rt_compile(source, "naive.cu", arch, NULL, 0, &bin));
  assert_non_null(bin.cubin);
  assert_true(bin.cubin_size > 1000);
  /* ELF magic: a real cubin, not PTX text */
  assert_memory_equal(bin.cubin, "\x7f" "ELF", 4);
  const char *kernels[] = {"naive_scores", "naive_softmax", "naive_pv"};
  for (int i = 0; i < 3; i++) {
    const rt_kernel_resources *r = rt_binary_kernel(&bin, kernels[i]);
    if (!r) fail_msg("no resource report for %s on %s; log:\n%s", kernels[i], arch, bin.log);
    assert_true(r->registers > 0);
    assert_int_equal(r->spill_store_bytes, 0);
    assert_int_equal(r->spill_load_bytes, 0);
  }
  rt_binary_free(&bin);
  free(source);
}

static void compile_naive(const char *arch, at_dtype in, at_dtype out) { compile_naive_kv(arch, in, in, out); }

static void test_naive_compiles_for_sm80_and_sm90a(void **state)
{
  (void)state;
  const char *archs[] = {"sm_80", "sm_90a"};
  const at_dtype ins[] = {AT_DTYPE_F32, AT_DTYPE_F16, AT_DTYPE_BF16};
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < 3; i++) {
      compile_naive(archs[a], ins[i], AT_DTYPE_F32);
      compile_naive(archs[a], ins[i], ins[i]);
    }
}

static void test_fp8_naive_compiles_for_sm90a(void **state)
{
  (void)state;
  compile_naive("sm_90a", AT_DTYPE_E4M3, AT_DTYPE_F32);
  compile_naive("sm_89", AT_DTYPE_E5M2, AT_DTYPE_BF16);
}

/* An FP8 KV cache with 16-bit Q: K and V decoded in integer arithmetic, so sm_80 too. */
static void test_fp8_kv_naive_compiles(void **state)
{
  (void)state;
  compile_naive_kv("sm_80", AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_DTYPE_F32);
  compile_naive_kv("sm_90a", AT_DTYPE_BF16, AT_DTYPE_E4M3, AT_DTYPE_BF16);
  compile_naive_kv("sm_90a", AT_DTYPE_F16, AT_DTYPE_E5M2, AT_DTYPE_F16);
  char *source = NULL;
  assert_int_equal(rt_naive_source_kv(AT_DTYPE_E4M3, AT_DTYPE_E5M2, AT_DTYPE_BF16, &source), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "naive K/V dtype e5m2 with e4m3 Q unsupported"));
  assert_null(source);
}

/* The comparison of every output dtype compiles, spill-free (FP8 outputs exist only where FP8
 * kernels run, sm_89 and newer: common.cuh decodes them with cvt); an unknown dtype is refused. */
static void test_compare_compiles(void **state)
{
  (void)state;
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int a = 0; a < 2; a++)
    for (int d = AT_DTYPE_F32; d <= AT_DTYPE_E5M2; d++) {
      if (a == 0 && at_dtype_is_fp8((at_dtype)d)) continue;
      char *source = NULL;
      rt_binary bin;
      TU_OK(rt_compare_source((at_dtype)d, &source));
      TU_OK(rt_compile(source, "compare.cu", archs[a], NULL, 0, &bin));
      const rt_kernel_resources *r = rt_binary_kernel(&bin, "at_compare");
      if (!r) fail_msg("no resource report for at_compare (%s) on %s; log:\n%s", at_dtype_name((at_dtype)d),
                       archs[a], bin.log);
      assert_int_equal(r->spill_store_bytes, 0);
      rt_binary_free(&bin);
      free(source);
    }
  char *source = NULL;
  assert_int_equal(rt_compare_source((at_dtype)9, &source), AT_ERR_INVALID);
  assert_null(source);
}

/* The kernels around cuDNN's ragged graph compile for both 16-bit output dtypes, spill-free, with
 * both entry points; other dtypes are refused with the dtype named. */
static void test_cudnn_ragged_kernels_compile(void **state)
{
  (void)state;
  const char *archs[] = {"sm_80", "sm_90a"};
  const at_dtype ios[] = {AT_DTYPE_F16, AT_DTYPE_BF16};
  const char *kernels[] = {"cudnn_ragged_prepare", "cudnn_ragged_finish"};
  for (int a = 0; a < 2; a++)
    for (int d = 0; d < 2; d++) {
      char *source = NULL;
      rt_binary bin;
      TU_OK(rt_cudnn_ragged_source(ios[d], &source));
      TU_OK(rt_compile(source, "cudnn_ragged.cu", archs[a], NULL, 0, &bin));
      for (int k = 0; k < 2; k++) {
        const rt_kernel_resources *r = rt_binary_kernel(&bin, kernels[k]);
        if (!r) fail_msg("no resource report for %s (%s) on %s; log:\n%s", kernels[k], at_dtype_name(ios[d]),
                         archs[a], bin.log);
        assert_int_equal(r->spill_store_bytes, 0);
        assert_int_equal(r->stack_bytes, 0);
      }
      rt_binary_free(&bin);
      free(source);
    }
  char *source = NULL;
  assert_int_equal(rt_cudnn_ragged_source(AT_DTYPE_E4M3, &source), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "f16 or bf16 output (got e4m3)"));
  assert_null(source);
}

/* The compile memo: one variant asked for by four threads at once compiles once, and every copy
 * is the same cubin with its resources; another target compiles apart; a variant that cannot be
 * emitted is remembered with its message; a copy outlives the memo. */
typedef struct memo_ask {
  rt_compile_memo *memo;
  gen_variant v;
  gen_target t;
  rt_compiled out;
} memo_ask;

static void *ask_memo(void *arg)
{
  memo_ask *a = arg;
  rt_compile_memoized(a->memo, &a->v, &a->t, &a->out);
  return NULL;
}

static void test_compile_memo(void **state)
{
  (void)state;
  rt_compile_memo *memo;
  TU_OK(rt_compile_memo_create(&memo));
  memo_ask asks[5];
  pthread_t threads[5];
  gen_target sm90 = tu_sm90(), sm80;
  TU_OK(gen_target_for_arch("sm_80", &sm80));
  for (int i = 0; i < 5; i++) {
    asks[i].memo = memo;
    TU_OK(gen_variant_parse("fa2.bf16.d64.none.g1.bm64.bn64.w4.s2", &asks[i].v));
    asks[i].t = i < 4 ? sm90 : sm80;
    assert_int_equal(pthread_create(&threads[i], NULL, ask_memo, &asks[i]), 0);
  }
  for (int i = 0; i < 5; i++) pthread_join(threads[i], NULL);
  int hits = -1, compiles = -1;
  rt_compile_memo_counts(memo, &hits, &compiles);
  assert_int_equal(compiles, 2); /* sm_90a once, sm_80 once */
  assert_int_equal(hits, 3);
  for (int i = 0; i < 5; i++) {
    TU_OK(asks[i].out.status);
    assert_string_equal(asks[i].out.key, "fa2.bf16.d64.none.g1.bm64.bn64.w4.s2");
    assert_true(asks[i].out.binary.cubin_size > 1000);
    assert_true(asks[i].out.resources.registers > 0);
  }
  for (int i = 1; i < 4; i++) {
    assert_int_equal(asks[i].out.binary.cubin_size, asks[0].out.binary.cubin_size);
    assert_ptr_not_equal(asks[i].out.binary.cubin, asks[0].out.binary.cubin); /* copies, not shared */
    assert_memory_equal(asks[i].out.binary.cubin, asks[0].out.binary.cubin, asks[0].out.binary.cubin_size);
  }
  /* A tile the shared memory cannot hold fails at emission; asked again, the memo answers. */
  memo_ask bad = {.memo = memo, .t = sm80};
  TU_OK(gen_variant_parse("fa2.bf16.d256.none.g1.bm128.bn256.w8.s4", &bad.v));
  rt_compiled again;
  rt_compile_memoized(memo, &bad.v, &bad.t, &bad.out);
  rt_compile_memoized(memo, &bad.v, &bad.t, &again);
  assert_int_not_equal(bad.out.status, AT_OK);
  assert_int_equal(again.status, bad.out.status);
  assert_string_equal(again.message, bad.out.message);
  assert_true(strlen(again.message) > 0);
  rt_compile_memo_counts(memo, &hits, &compiles);
  assert_int_equal(compiles, 3);
  assert_int_equal(hits, 4);
  rt_compile_memo_destroy(memo);
  /* The copies are the callers': still readable after the memo is gone (ASan checks it). */
  for (int i = 0; i < 5; i++) {
    assert_memory_equal(asks[i].out.binary.cubin, "\x7f" "ELF", 4);
    rt_compiled_free(&asks[i].out, 1);
  }
  rt_compiled_free(&bad.out, 1), rt_compiled_free(&again, 1);
}

static void test_compile_error_keeps_the_log(void **state)
{
  (void)state;
  rt_binary bin;
  const char *bad = "extern \"C\" __global__ void k(int *p) { p[0] = undefined_name; }\n";
  assert_int_equal(rt_compile(bad, "bad.cu", "sm_90a", NULL, 0, &bin), AT_ERR_COMPILE);
  assert_non_null(strstr(at_last_error(), "undefined_name"));
  assert_non_null(strstr(at_last_error(), "bad.cu"));
  assert_non_null(bin.log);
  assert_non_null(strstr(bin.log, "undefined_name"));
  assert_null(bin.cubin);
  rt_binary_free(&bin);
}

static void test_bad_architecture_is_refused(void **state)
{
  (void)state;
  rt_binary bin;
  assert_int_equal(rt_compile("", "x.cu", "sm_9x", NULL, 0, &bin), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "unknown architecture 'sm_9x'"));
  assert_int_equal(rt_compile("", "x.cu", "sm_70", NULL, 0, &bin), AT_ERR_INVALID);
  int major, minor, specific;
  TU_OK(at_arch_parse("sm_90a", &major, &minor, &specific));
  assert_int_equal(major, 9);
  assert_int_equal(minor, 0);
  assert_int_equal(specific, 1);
  char arch[16];
  at_arch_for_cc(9, 0, arch);
  assert_string_equal(arch, "sm_90a");
  at_arch_for_cc(8, 6, arch);
  assert_string_equal(arch, "sm_86");
}

static void test_nvrtc_version(void **state)
{
  (void)state;
  int major = 0, minor = 0;
  TU_OK(rt_nvrtc_version(&major, &minor));
  assert_true(major >= 12);
}

/* ptxas' report that it serialized a kernel's wgmmas reaches the resources of that kernel (and
 * of no other): a wgmma accumulator written by an add between the wgmma and its wait, beside the
 * same loop without the add. */
static void test_serialized_wgmma_reported(void **state)
{
  (void)state;
  static const char source[] =
      "__device__ void mma(float *d, unsigned long long da, unsigned long long db)\n"
      "{\n"
      "  asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");\n"
      "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\\n\"\n"
      "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3]) : \"l\"(da), \"l\"(db));\n"
      "  asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
      "}\n"
      "extern \"C\" __global__ void serial(float *o, unsigned long long da, unsigned long long db, int n)\n"
      "{\n"
      "  float d[4] = {0.f, 0.f, 0.f, 0.f};\n"
      "  for (int i = 0; i < n; i++) {\n"
      "    mma(d, da, db);\n"
      "    if (i > 0) d[0] += 1.f;\n"
      "    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
      "  }\n"
      "  o[threadIdx.x] = d[0] + d[1] + d[2] + d[3];\n"
      "}\n"
      "extern \"C\" __global__ void piped(float *o, unsigned long long da, unsigned long long db, int n)\n"
      "{\n"
      "  float d[4] = {0.f, 0.f, 0.f, 0.f};\n"
      "  for (int i = 0; i < n; i++) {\n"
      "    mma(d, da, db);\n"
      "    asm volatile(\"wgmma.wait_group.sync.aligned 0;\\n\" ::: \"memory\");\n"
      "  }\n"
      "  o[threadIdx.x] = d[0] + d[1] + d[2] + d[3];\n"
      "}\n";
  rt_binary bin;
  TU_OK(rt_compile(source, "serial.cu", "sm_90a", NULL, 0, &bin));
  const rt_kernel_resources *serial = rt_binary_kernel(&bin, "serial"), *piped = rt_binary_kernel(&bin, "piped");
  if (!serial || !piped) fail_msg("no resource report; log:\n%s", bin.log);
  if (!serial->wgmma_serialized) fail_msg("serialized wgmmas not reported; log:\n%s", bin.log);
  assert_int_equal(piped->wgmma_serialized, 0);
  rt_binary_free(&bin);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_naive_compiles_for_sm80_and_sm90a),
      cmocka_unit_test(test_fp8_naive_compiles_for_sm90a),
      cmocka_unit_test(test_fp8_kv_naive_compiles),
      cmocka_unit_test(test_compare_compiles),
      cmocka_unit_test(test_cudnn_ragged_kernels_compile),
      cmocka_unit_test(test_compile_memo),
      cmocka_unit_test(test_compile_error_keeps_the_log),
      cmocka_unit_test(test_bad_architecture_is_refused),
      cmocka_unit_test(test_nvrtc_version),
      cmocka_unit_test(test_serialized_wgmma_reported),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
