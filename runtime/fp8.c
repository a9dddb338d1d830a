/*
 * fp8.c — host-side FP8 conversions per the OCP 8-bit floating point spec (v1.0), and a
 * per-tensor quantizer.
 *
 *   format  bits      bias  max finite       min normal  min subnormal  specials
 *   E4M3    S EEEE MMM  7   448   (0x7E)     2^-6        2^-9           NaN = S.1111.111, no inf
 *   E5M2    S EEEEE MM 15   57344 (0x7B)     2^-14       2^-16          inf = S.11111.00,
 *                                                                       NaN = S.11111.{01,10,11}
 *
 * Encoding rounds to nearest even and saturates: anything beyond the largest finite value
 * (infinities included) becomes ±max, like CUDA's __NV_SATFINITE conversions. NaN stays NaN
 * (sign kept). The sign of zero is kept.
 */
#include <math.h>
#include <string.h>

#include "attntune_fp8.h"
#include "runtime/rt.h"

/* One FP8 format: exponent and mantissa widths, bias, and the code of the largest finite value. */
typedef struct fp8_format {
  int exp_bits, man_bits, bias;
  uint8_t max_code;  /* without the sign bit */
  uint8_t nan_code;  /* canonical NaN, without the sign bit */
  float max_value;
} fp8_format;

static const fp8_format k_e4m3 = {4, 3, 7, 0x7E, 0x7F, 448.0f};
static const fp8_format k_e5m2 = {5, 2, 15, 0x7B, 0x7F, 57344.0f};

static const fp8_format *format_of(at_dtype dtype)
{
  if (dtype == AT_DTYPE_E4M3) return &k_e4m3;
  if (dtype == AT_DTYPE_E5M2) return &k_e5m2;
  return NULL;
}

/* x >> s rounded to nearest, ties to even (s in 1..31). */
static uint32_t shift_round_even(uint32_t x, int s)
{
  const uint32_t q = x >> s, r = x & ((1u << s) - 1u), half = 1u << (s - 1);
  return q + (r > half || (r == half && (q & 1u)));
}

/* Encode |x| (finite, >= 0) to a code without the sign bit, on the float's bits: with x = M *
 * 2^(e - 23) (M the 24-bit significand), the code's mantissa m is M * 2^(man_bits - 23) in a
 * normal binade e and M * 2^(e - 23 + man_bits - emin) below it, rounded half to even. A
 * mantissa that rounds up to the next power of two carries into the exponent field by itself,
 * because code = (e + bias) << man_bits + m - 2^man_bits (and m = 2^man_bits from the subnormal
 * range is the smallest normal's code). Bit-operations only: a tuning run packs billions of
 * random inputs (an FP8 KV cache of B=128, S=16k holds 4.3e9), where frexpf, ldexpf and
 * nearbyintf took over a minute. */
static uint8_t encode_magnitude(float ax, const fp8_format *f)
{
  const int emin = 1 - f->bias;
  if (ax > f->max_value) return f->max_code;
  uint32_t bits;
  memcpy(&bits, &ax, sizeof bits);
  if ((bits >> 23) == 0) return 0; /* zero, or a float subnormal: far under half the FP8 quantum */
  const int e = (int)(bits >> 23) - 127;
  const uint32_t significand = (bits & 0x7fffffu) | 0x800000u;
  if (e < emin) { /* the FP8 subnormal range: code = m in [0, 2^man_bits] */
    const int s = 23 - f->man_bits + (emin - e);
    return s > 31 ? 0 : (uint8_t)shift_round_even(significand, s);
  }
  const int m = (int)shift_round_even(significand, 23 - f->man_bits); /* in [2^man_bits, 2^(man_bits+1)] */
  const int code = ((e + f->bias) << f->man_bits) + m - (1 << f->man_bits);
  if (code > f->max_code) return f->max_code; /* rounded past max finite: saturate */
  return (uint8_t)code;
}

static uint8_t encode(float x, const fp8_format *f)
{
  uint8_t sign = signbit(x) ? 0x80 : 0x00;
  if (isnan(x)) return (uint8_t)(sign | f->nan_code);
  return (uint8_t)(sign | encode_magnitude(fabsf(x), f));
}

static float decode(uint8_t code, const fp8_format *f)
{
  const int man_mask = (1 << f->man_bits) - 1;
  const int exp_max = (1 << f->exp_bits) - 1;
  int exp_field = (code & 0x7F) >> f->man_bits;
  int man = code & man_mask;
  float sign = (code & 0x80) ? -1.0f : 1.0f;
  /* NaNs keep their sign so that a decode/encode round trip gives the same code back */
  if (f == &k_e4m3 && (code & 0x7F) == 0x7F) return copysignf(NAN, sign);
  if (f == &k_e5m2 && exp_field == exp_max) return man == 0 ? sign * INFINITY : copysignf(NAN, sign);
  if (exp_field == 0) return sign * ldexpf((float)man, 1 - f->bias - f->man_bits);
  return sign * ldexpf((float)(man | (1 << f->man_bits)), exp_field - f->bias - f->man_bits);
}

uint8_t at_f32_to_e4m3(float x) { return encode(x, &k_e4m3); }
float at_e4m3_to_f32(uint8_t code) { return decode(code, &k_e4m3); }
uint8_t at_f32_to_e5m2(float x) { return encode(x, &k_e5m2); }
float at_e5m2_to_f32(uint8_t code) { return decode(code, &k_e5m2); }

float at_fp8_max(at_dtype fp8)
{
  const fp8_format *f = format_of(fp8);
  return f ? f->max_value : 0.0f;
}

uint8_t at_f32_to_fp8(float x, at_dtype fp8)
{
  const fp8_format *f = format_of(fp8);
  return f ? encode(x, f) : 0;
}

float at_fp8_to_f32(uint8_t code, at_dtype fp8)
{
  const fp8_format *f = format_of(fp8);
  return f ? decode(code, f) : NAN;
}

static float bf16_bits_to_f32(uint16_t h)
{
  uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* Shared body of the quantizers: get(i) reads element i as float. */
typedef float (*elem_reader)(const void *x, size_t i);
static float read_f32(const void *x, size_t i) { return ((const float *)x)[i]; }
static float read_bf16(const void *x, size_t i) { return bf16_bits_to_f32(((const uint16_t *)x)[i]); }

static at_status quantize(const void *x, elem_reader get, size_t n, at_dtype fp8, uint8_t *out,
                          float *scale_out)
{
  const fp8_format *f = format_of(fp8);
  if (!f)
    return at_fail(AT_ERR_INVALID, "at_quantize_fp8: dtype '%s' is not an FP8 type (expected e4m3 or e5m2)",
                   at_dtype_name(fp8));
  if ((n && (!x || !out)) || !scale_out)
    return at_fail(AT_ERR_INVALID, "at_quantize_fp8: NULL %s", !scale_out ? "scale_out" : !x ? "x" : "out");
  float amax = 0.0f;
  for (size_t i = 0; i < n; i++) {
    float v = get(x, i);
    if (isinf(v))
      return at_fail(AT_ERR_INVALID, "at_quantize_fp8: x[%zu] is %s; an amax-derived scale needs finite values",
                     i, v > 0 ? "inf" : "-inf");
    if (fabsf(v) > amax) amax = fabsf(v); /* false for NaN, so NaNs do not count */
  }
  /* An all-zero (or all-NaN) tensor has no magnitude to map; scale 1 keeps zeros zero. */
  float scale = amax > 0.0f ? f->max_value / amax : 1.0f;
  if (!isfinite(scale)) scale = 1.0f; /* amax so small that max/amax overflows: x*1 encodes as 0 */
  for (size_t i = 0; i < n; i++) out[i] = encode(get(x, i) * scale, f);
  *scale_out = scale;
  return AT_OK;
}

at_status at_quantize_fp8(const float *x, size_t n, at_dtype fp8, uint8_t *out, float *scale_out)
{
  return quantize(x, read_f32, n, fp8, out, scale_out);
}

at_status at_quantize_fp8_bf16(const uint16_t *x, size_t n, at_dtype fp8, uint8_t *out, float *scale_out)
{
  return quantize(x, read_bf16, n, fp8, out, scale_out);
}
