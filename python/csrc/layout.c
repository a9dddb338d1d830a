/*
 * layout.c — sizeof/offsetof of every public struct of attntune.h, as the compiler sees them.
 * python/tests/test_layout.py compares this table with the ctypes declarations of
 * attntune/_lib.py, so a header change that the Python side missed fails a test instead of
 * corrupting memory. A field added to the header without a row here still changes the struct's
 * size, which the struct's own row catches.
 */
#include <stddef.h>

#include "atpy.h"

#define STRUCT(t) {#t, NULL, 0, sizeof(t)}
#define FIELD(t, f) {#t, #f, offsetof(t, f), sizeof(((t *)0)->f)}

static const atpy_field ROWS[] = {
    STRUCT(at_shape),
    FIELD(at_shape, batch),
    FIELD(at_shape, q_len),
    FIELD(at_shape, kv_len),
    FIELD(at_shape, q_heads),
    FIELD(at_shape, kv_heads),
    FIELD(at_shape, head_dim),
    FIELD(at_shape, dtype),
    FIELD(at_shape, mask),
    FIELD(at_shape, scale),
    FIELD(at_shape, with_lse),
    FIELD(at_shape, kv_dtype),

    STRUCT(at_strides),
    FIELD(at_strides, batch),
    FIELD(at_strides, seq),
    FIELD(at_strides, head),

    STRUCT(at_tensors),
    FIELD(at_tensors, q),
    FIELD(at_tensors, k),
    FIELD(at_tensors, v),
    FIELD(at_tensors, o),
    FIELD(at_tensors, lse),
    FIELD(at_tensors, q_stride),
    FIELD(at_tensors, k_stride),
    FIELD(at_tensors, v_stride),
    FIELD(at_tensors, o_stride),

    STRUCT(at_layout),
    FIELD(at_layout, q),
    FIELD(at_layout, k),
    FIELD(at_layout, v),
    FIELD(at_layout, o),

    STRUCT(at_plan_options),
    FIELD(at_plan_options, impl),

    STRUCT(at_fp8_args),
    FIELD(at_fp8_args, descale_q),
    FIELD(at_fp8_args, descale_k),
    FIELD(at_fp8_args, descale_v),

    STRUCT(at_plan_info),
    FIELD(at_plan_info, impl),
    FIELD(at_plan_info, choice),
    FIELD(at_plan_info, reason),
    FIELD(at_plan_info, tuned_shape),
    FIELD(at_plan_info, tuned_ms),
    FIELD(at_plan_info, cudnn_ms),
    FIELD(at_plan_info, compiled),
    FIELD(at_plan_info, create_ms),

    STRUCT(at_serving_layout),
    FIELD(at_serving_layout, struct_size),
    FIELD(at_serving_layout, q_layout),
    FIELD(at_serving_layout, kv_layout),
    FIELD(at_serving_layout, page_size),
    FIELD(at_serving_layout, max_pages_per_seq),
    FIELD(at_serving_layout, strides),

    STRUCT(at_serving_tensors),
    FIELD(at_serving_tensors, struct_size),
    FIELD(at_serving_tensors, q),
    FIELD(at_serving_tensors, k),
    FIELD(at_serving_tensors, v),
    FIELD(at_serving_tensors, o),
    FIELD(at_serving_tensors, lse),
    FIELD(at_serving_tensors, q_stride),
    FIELD(at_serving_tensors, k_stride),
    FIELD(at_serving_tensors, v_stride),
    FIELD(at_serving_tensors, o_stride),
    FIELD(at_serving_tensors, cu_seqlens_q),
    FIELD(at_serving_tensors, cu_seqlens_kv),
    FIELD(at_serving_tensors, block_table),
    FIELD(at_serving_tensors, seqlens_kv),
    FIELD(at_serving_tensors, total_q),
    FIELD(at_serving_tensors, total_kv),
    FIELD(at_serving_tensors, num_pages),
};

const atpy_field *atpy_layout_row(int i)
{
  if (i < 0 || (size_t)i >= sizeof ROWS / sizeof *ROWS) return NULL;
  return &ROWS[i];
}
