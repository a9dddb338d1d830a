/*
 * test_fp8.c — FP8 E4M3 / E5M2 conversions against the OCP 8-bit floating point spec, and the
 * amax-scaled quantizer. No GPU needed.
 *
 * Expected values are computed here from the bit fields with double arithmetic (pow), not with
 * the library's own formula, so a shared mistake in both is unlikely.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "attntune.h"
#include "attntune_fp8.h"
#include "tests/testutil.h"

/* The spec's value of a code: E4M3 has bias 7 and NaN at S.1111.111; E5M2 has bias 15, inf at
 * S.11111.00 and NaN at S.11111.{01,10,11}. Subnormals have exponent field 0. */
static double spec_e4m3(unsigned c)
{
  unsigned s = c >> 7, e = (c >> 3) & 0xF, m = c & 0x7;
  double sign = s ? -1.0 : 1.0;
  if (e == 0xF && m == 0x7) return NAN;
  if (e == 0) return sign * (m / 8.0) * pow(2.0, -6);
  return sign * (1.0 + m / 8.0) * pow(2.0, (double)e - 7);
}

static double spec_e5m2(unsigned c)
{
  unsigned s = c >> 7, e = (c >> 2) & 0x1F, m = c & 0x3;
  double sign = s ? -1.0 : 1.0;
  if (e == 0x1F) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * (m / 4.0) * pow(2.0, -14);
  return sign * (1.0 + m / 4.0) * pow(2.0, (double)e - 15);
}

typedef struct fmt {
  const char *name;
  at_dtype dtype;
  double (*spec)(unsigned);
  uint8_t (*enc)(float);
  float (*dec)(uint8_t);
  uint8_t max_code;
  float max_value;
} fmt;

static const fmt k_fmts[2] = {
  {"e4m3", AT_DTYPE_E4M3, spec_e4m3, at_f32_to_e4m3, at_e4m3_to_f32, 0x7E, 448.0f},
  {"e5m2", AT_DTYPE_E5M2, spec_e5m2, at_f32_to_e5m2, at_e5m2_to_f32, 0x7B, 57344.0f},
};

static void test_decode_all_codes(void **state)
{
  (void)state;
  for (int k = 0; k < 2; k++) {
    const fmt *f = &k_fmts[k];
    for (unsigned c = 0; c < 256; c++) {
      double want = f->spec(c);
      float got = f->dec((uint8_t)c);
      if (isnan(want)) {
        if (!isnan(got)) fail_msg("%s code 0x%02X: want NaN, got %g", f->name, c, got);
        continue;
      }
      if ((double)got != want || !signbit(got) != !signbit(want))
        fail_msg("%s code 0x%02X: want %.9g, got %.9g", f->name, c, want, got);
    }
  }
}

static void test_known_values(void **state)
{
  (void)state;
  assert_true(at_e4m3_to_f32(0x7E) == 448.0f);
  assert_true(at_e4m3_to_f32(0x08) == ldexpf(1.0f, -6));  /* min normal */
  assert_true(at_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));  /* min subnormal */
  assert_true(at_e4m3_to_f32(0x38) == 1.0f);
  assert_true(isnan(at_e4m3_to_f32(0x7F)) && isnan(at_e4m3_to_f32(0xFF)));
  assert_true(at_e4m3_to_f32(0x78) == 256.0f); /* S.1111.000 is a number in E4M3, not inf */
  assert_true(at_e5m2_to_f32(0x7B) == 57344.0f);
  assert_true(at_e5m2_to_f32(0x04) == ldexpf(1.0f, -14));
  assert_true(at_e5m2_to_f32(0x01) == ldexpf(1.0f, -16));
  assert_true(at_e5m2_to_f32(0x3C) == 1.0f);
  assert_true(isinf(at_e5m2_to_f32(0x7C)) && at_e5m2_to_f32(0x7C) > 0);
  assert_true(isinf(at_e5m2_to_f32(0xFC)) && at_e5m2_to_f32(0xFC) < 0);
  assert_true(isnan(at_e5m2_to_f32(0x7D)) && isnan(at_e5m2_to_f32(0xFE)));
  assert_true(at_fp8_max(AT_DTYPE_E4M3) == 448.0f && at_fp8_max(AT_DTYPE_E5M2) == 57344.0f);
  assert_true(at_fp8_max(AT_DTYPE_BF16) == 0.0f);
}

/* Every finite code encodes back to itself (both zeros included); NaN codes encode to a NaN;
 * E5M2 infinities saturate to the largest finite value of their sign. */
static void test_roundtrip_codes(void **state)
{
  (void)state;
  for (int k = 0; k < 2; k++) {
    const fmt *f = &k_fmts[k];
    for (unsigned c = 0; c < 256; c++) {
      float v = f->dec((uint8_t)c);
      uint8_t back = f->enc(v);
      if (isnan(v)) {
        if (!isnan(f->dec(back))) fail_msg("%s NaN code 0x%02X encoded to non-NaN 0x%02X", f->name, c, back);
        if ((back & 0x80) != (c & 0x80)) fail_msg("%s NaN code 0x%02X lost its sign", f->name, c);
      } else if (isinf(v)) {
        uint8_t want = (uint8_t)((c & 0x80) | f->max_code);
        if (back != want) fail_msg("%s inf code 0x%02X: want saturation 0x%02X, got 0x%02X", f->name, c, want, back);
      } else if (back != c) {
        fail_msg("%s code 0x%02X (%.9g) encoded to 0x%02X", f->name, c, v, back);
      }
    }
  }
}

/* Halfway between two adjacent codes the even code (LSB 0) wins; just off the midpoint the
 * nearer one does. Adjacent positive codes are c and c+1 for every finite c below max. */
static void test_round_to_nearest_even(void **state)
{
  (void)state;
  for (int k = 0; k < 2; k++) {
    const fmt *f = &k_fmts[k];
    for (unsigned c = 0; c < f->max_code; c++) {
      double lo = f->spec(c), hi = f->spec(c + 1);
      float mid = (float)((lo + hi) / 2); /* exact: a few significant bits */
      assert_true((double)mid == (lo + hi) / 2);
      unsigned even = (c & 1) ? c + 1 : c;
      uint8_t got = f->enc(mid);
      if (got != even) fail_msg("%s midpoint %.9g of 0x%02X/0x%02X: want 0x%02X, got 0x%02X", f->name, mid, c, c + 1, even, got);
      if (f->enc(nextafterf(mid, 0.0f)) != c) fail_msg("%s just below %.9g: want 0x%02X", f->name, mid, c);
      if (f->enc(nextafterf(mid, INFINITY)) != c + 1) fail_msg("%s just above %.9g: want 0x%02X", f->name, mid, c + 1);
      /* the same on the negative side */
      if (f->enc(-mid) != (0x80 | even)) fail_msg("%s midpoint -%.9g: want 0x%02X", f->name, mid, 0x80 | even);
    }
  }
  /* spot checks by hand: E4M3 spacing at 1.0 is 0.125 */
  assert_int_equal(at_f32_to_e4m3(1.0625f), 0x38); /* tie 1.0 / 1.125 -> 1.0 (even) */
  assert_int_equal(at_f32_to_e4m3(1.1875f), 0x3A); /* tie 1.125 / 1.25 -> 1.25 (even) */
  assert_int_equal(at_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00); /* half the min subnormal -> 0 */
  assert_int_equal(at_f32_to_e4m3(ldexpf(3.0f, -10)), 0x02); /* 1.5 min subnormals -> 2 */
  assert_int_equal(at_f32_to_e5m2(1.125f), 0x3C);  /* tie 1.0 / 1.25 -> 1.0 */
  assert_int_equal(at_f32_to_e5m2(1.375f), 0x3E);  /* tie 1.25 / 1.5 -> 1.5 */
}

static void test_saturation_and_specials(void **state)
{
  (void)state;
  for (int k = 0; k < 2; k++) {
    const fmt *f = &k_fmts[k];
    const float big[] = {f->max_value * 1.01f, f->max_value * 1.5f, 1e30f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
      if (f->enc(big[i]) != f->max_code) fail_msg("%s %g: want saturation to 0x%02X", f->name, big[i], f->max_code);
      if (f->enc(-big[i]) != (0x80 | f->max_code)) fail_msg("%s -%g: want -max", f->name, big[i]);
    }
    /* halfway between max and the next binade step would round up: still saturates */
    float over = f->max_value + (float)(f->spec(f->max_code) - f->spec(f->max_code - 1)) / 2;
    assert_int_equal(f->enc(over), f->max_code);
    assert_int_equal(f->enc(0.0f), 0x00);
    assert_int_equal(f->enc(-0.0f), 0x80);
    assert_int_equal(f->enc(1e-30f), 0x00);
    assert_int_equal(f->enc(-1e-30f), 0x80);
    assert_int_equal(f->enc(FLT_TRUE_MIN), 0x00);
    assert_true(isnan(f->dec(f->enc(NAN))));
    assert_true(isnan(f->dec(f->enc(-NAN))));
    assert_int_equal(at_f32_to_fp8(1.0f, f->dtype), f->enc(1.0f));
    assert_true(at_fp8_to_f32(f->max_code, f->dtype) == f->max_value);
  }
}

/* decode's .wgi with bf16 Q (templates/decode.cu, dec_wg_q8_fragments) holds q 2^e as two E4M3
 * parts, hi = e4m3(x) and lo = e4m3(x - hi), with 2^e putting the rows' largest |q| in [2^7, 2^8).
 * Every bf16 value x there (8 significant bits) is hi + lo exactly while |x| >= 2^-2 (lo is then
 * a multiple of E4M3's smallest subnormal, 2^-9); below that, at most 2^-10 off. */
static void test_bf16_splits_into_two_e4m3(void **state)
{
  (void)state;
  int exact = 0;
  for (int e = -14; e <= 7; e++)
    for (int m = 0; m < 128; m++)
      for (int sign = -1; sign <= 1; sign += 2) {
        const float x = (float)sign * ldexpf(1.0f + (float)m / 128.0f, e);
        const float hi = at_e4m3_to_f32(at_f32_to_e4m3(x));
        const float lo = at_e4m3_to_f32(at_f32_to_e4m3(x - hi));
        if (fabsf(x) >= 0.25f) {
          if (hi + lo != x) fail_msg("bf16 %.9g: hi %.9g + lo %.9g is not exact", x, hi, lo);
          exact++;
        } else if (fabsf(hi + lo - x) > ldexpf(1.0f, -10)) {
          fail_msg("bf16 %.9g: hi %.9g + lo %.9g is %.3g off", x, hi, lo, hi + lo - x);
        }
      }
  assert_int_equal(exact, 2 * 128 * 10); /* binades 2^-2 .. 2^7 */
}

static void test_quantize(void **state)
{
  (void)state;
  enum { N = 1000 };
  float x[N];
  uint16_t xb[N];
  uint8_t q[N];
  uint32_t seed = 12345;
  for (int i = 0; i < N; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 6.0f; /* (-3, 3) */
    uint32_t bits;
    memcpy(&bits, &x[i], 4);
    xb[i] = (uint16_t)(bits >> 16); /* truncated to bf16 is fine for this check */
  }
  x[17] = -7.5f; /* the amax */
  xb[17] = 0xC0F0; /* -7.5 in bf16 */
  for (int k = 0; k < 2; k++) {
    const fmt *f = &k_fmts[k];
    /* 3 mantissa bits -> relative rounding error <= 2^-4; 2 bits -> 2^-3 (normal range) */
    const float rel = f->dtype == AT_DTYPE_E4M3 ? 0.0625f : 0.125f;
    float scale = 0.0f;
    assert_int_equal(at_quantize_fp8(x, N, f->dtype, q, &scale), AT_OK);
    assert_true(fabsf(scale - f->max_value / 7.5f) <= 1e-6f * scale);
    assert_int_equal(q[17], 0x80 | f->max_code);
    for (int i = 0; i < N; i++) {
      float back = f->dec(q[i]) / scale;
      float tol = rel * fabsf(x[i]) + f->spec(1) / scale; /* plus one subnormal step near zero */
      if (fabsf(back - x[i]) > tol) fail_msg("%s x[%d]=%g dequantized to %g", f->name, i, x[i], back);
    }
    float scale_b = 0.0f;
    assert_int_equal(at_quantize_fp8_bf16(xb, N, f->dtype, q, &scale_b), AT_OK);
    assert_true(scale_b == f->max_value / 7.5f);
    assert_int_equal(q[17], 0x80 | f->max_code);
  }
  /* zeros: scale 1, codes 0; NaN ignored for the amax but encoded as NaN */
  float z[4] = {0.0f, -0.0f, NAN, 0.5f};
  float scale = 0.0f;
  assert_int_equal(at_quantize_fp8(z, 2, AT_DTYPE_E4M3, q, &scale), AT_OK);
  assert_true(scale == 1.0f && q[0] == 0x00 && q[1] == 0x80);
  assert_int_equal(at_quantize_fp8(z, 4, AT_DTYPE_E4M3, q, &scale), AT_OK);
  assert_true(scale == 448.0f / 0.5f && isnan(at_e4m3_to_f32(q[2])) && q[3] == 0x7E);
  /* refusals */
  float inf[2] = {1.0f, -INFINITY};
  assert_int_equal(at_quantize_fp8(inf, 2, AT_DTYPE_E4M3, q, &scale), AT_ERR_INVALID);
  assert_int_equal(at_quantize_fp8(x, N, AT_DTYPE_BF16, q, &scale), AT_ERR_INVALID);
  assert_int_equal(at_quantize_fp8(x, N, AT_DTYPE_E4M3, NULL, &scale), AT_ERR_INVALID);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_decode_all_codes),
    cmocka_unit_test(test_known_values),
    cmocka_unit_test(test_roundtrip_codes),
    cmocka_unit_test(test_round_to_nearest_even),
    cmocka_unit_test(test_saturation_and_specials),
    cmocka_unit_test(test_quantize),
    cmocka_unit_test(test_bf16_splits_into_two_e4m3),
  };
  return TU_RUN_GROUP(tests, NULL, NULL);
}
