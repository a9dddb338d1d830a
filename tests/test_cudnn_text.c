/*
 * test_cudnn_text.c — turning cuDNN's error text into one line for messages, and path names.
 * No GPU and no cuDNN needed. The first sample is what cuDNN 9.19 on the H200 returned from
 * cudnnGetLastErrorString for an SDPA graph with D=12 (engines offered, none viable).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cudnn_sdpa.h"
#include "tests/testutil.h"

static const char SAMPLE_D12[] =
    "{\"engineId\":0,\"smVersion\":900,\"knobChoices\":{\"CUDNN_KNOB_TYPE_KERNEL_CFG\":-1}}\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: The matmul should either be an entrance node or occur "
    "after the softmax and only allowed 2 at: true\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: tag_mha_graph(graph, mha_mode, is_fp8)\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: (CUDNN_STATUS_NOT_INITIALIZED == status) || "
    "(CUDNN_STATUS_NOT_SUPPORTED == ((status) / 1000 * 1000))\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: ptr->isSupported()\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: finalize_internal()\n"
    "\n"
    "{\"engineId\":1,\"smVersion\":900,\"knobChoices\":{\"CUDNN_KNOB_TYPE_KERNEL_CFG\":-1}}\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_SHAPE; Reason: Embedding dim per head for q and k is not a "
    "multiple of 8 at: d_qk % 8 != 0\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_SHAPE; Reason: extractAttentionParameters(graph, kcfg, "
    "attn_kernel_desc, receive_op, mha_mode, mma_pipeline_op, attn_desc)\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_SHAPE; Reason: generate_attention_desc()\n"
    "\n"
    "{\"engineId\":9,\"smVersion\":900,\"knobChoices\":{\"CUDNN_KNOB_TYPE_KERNEL_CFG\":-1}}\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_SHAPE; Reason: Embedding dim per head for q and k is not a "
    "multiple of 8 at: d_qk % 8 != 0\n"
    "Warning: CUDNN_STATUS_NOT_SUPPORTED_SHAPE; Reason: generate_attention_desc()\n";

static void test_engine_blocks(void **state)
{
  (void)state;
  char out[1024];
  rt_cudnn_summarize(SAMPLE_D12, out, sizeof out);
  printf("  %s\n", out);
  assert_string_equal(out,
                      "[eng0] The matmul should either be an entrance node or occur after the softmax and only "
                      "allowed 2 at: true; [eng1] Embedding dim per head for q and k is not a multiple of 8 at: "
                      "d_qk % 8 != 0");
}

/* The log's own format: error stacks with headers, a success line to skip, a cut-off tail. */
static void test_error_stacks(void **state)
{
  (void)state;
  const char *text = "w!         Warning: CUDNN_STATUS_SUCCESS; Reason: cuDNN Library configuration is set to AUTO.\n"
                     "w!     === error stack (1/2) ===\n"
                     "w!     Warning: CUDNN_STATUS_NOT_SUPPORTED_LAYOUT; Reason: stride of K is not 1 at: x\n"
                     "w!     Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: finalize_internal()\n"
                     "w!     === error stack (2/2) ===\n"
                     "w!     Warning: CUDNN_STATUS_BAD_PARAM; Reason: head dim too large at: d > 256\n"
                     "w!     Warning: CUDNN_STATUS_BAD_PARAM; Reason: gener";
  char out[512];
  rt_cudnn_summarize(text, out, sizeof out);
  assert_string_equal(out, "stride of K is not 1 at: x; head dim too large at: d > 256");
}

static void test_plain_text_and_small_buffers(void **state)
{
  (void)state;
  char out[64];
  rt_cudnn_summarize("CUDNN_BACKEND_TENSOR_DESCRIPTOR:\n  bad dims\n\n", out, sizeof out);
  assert_string_equal(out, "CUDNN_BACKEND_TENSOR_DESCRIPTOR: bad dims");
  rt_cudnn_summarize("", out, sizeof out);
  assert_string_equal(out, "");
  char tiny[24];
  rt_cudnn_summarize(SAMPLE_D12, tiny, sizeof tiny); /* truncated, still terminated */
  assert_true(strlen(tiny) < sizeof tiny);
  assert_true(strncmp(tiny, "[eng0] The matmul", 17) == 0);
}

static void test_path_names(void **state)
{
  (void)state;
  rt_cudnn_path p;
  const rt_cudnn_path all[] = {RT_CUDNN_PATH_AUTO, RT_CUDNN_PATH_COMPOSITE, RT_CUDNN_PATH_UNIFIED, RT_CUDNN_PATH_FP8};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(rt_cudnn_path_parse(rt_cudnn_path_name(all[i]), &p), AT_OK);
    assert_int_equal(p, all[i]);
  }
  assert_int_equal(rt_cudnn_path_parse("fused", &p), AT_ERR_INVALID);
  assert_non_null(strstr(at_last_error(), "'fused'"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_engine_blocks),
      cmocka_unit_test(test_error_stacks),
      cmocka_unit_test(test_plain_text_and_small_buffers),
      cmocka_unit_test(test_path_names),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
