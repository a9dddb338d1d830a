/*
 * attntune_fp8.h — FP8 helpers beyond the scalar conversions declared in attntune.h: format limits
 * and a per-tensor quantizer with an amax-derived scale, as cuDNN and TransformerEngine use them.
 *
 * Scaling convention (the one cuDNN's FP8 attention graph takes):
 *   code  = fp8(x * scale)          scale   = fp8_max / amax(x)
 *   x    ~= decode(code) * descale  descale = 1 / scale
 * so the largest magnitude of x lands on the largest finite FP8 value and nothing saturates.
 */
#ifndef ATTNTUNE_FP8_H
#define ATTNTUNE_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "attntune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest finite value of an FP8 dtype: 448 for E4M3, 57344 for E5M2, 0 for any other dtype. */
AT_API float at_fp8_max(at_dtype fp8);

/* Encode / decode one value of either FP8 dtype (E4M3 or E5M2); see attntune.h for the rules.
 * For a dtype that is not FP8, encode returns 0 and decode returns NaN. */
AT_API uint8_t at_f32_to_fp8(float x, at_dtype fp8);
AT_API float at_fp8_to_f32(uint8_t code, at_dtype fp8);

/* Quantize n floats to FP8 with one scale derived from their amax (NaNs are ignored for the amax
 * and encode as NaN). *scale_out receives the scale (the descale is 1 / scale); an all-zero input
 * gets scale 1. AT_ERR_INVALID for a dtype that is not FP8, a NULL pointer, or an infinite input
 * (no finite scale exists). */
AT_API at_status at_quantize_fp8(const float *x, size_t n, at_dtype fp8, uint8_t *out, float *scale_out);
/* The same for bf16 input (raw bf16 bit patterns). */
AT_API at_status at_quantize_fp8_bf16(const uint16_t *x, size_t n, at_dtype fp8, uint8_t *out,
                               float *scale_out);

#ifdef __cplusplus
}
#endif
#endif /* ATTNTUNE_FP8_H */
