/* numerics.c — host conversions between fp32 and the 16-bit float formats (round to nearest even). */
#include <math.h>
#include <string.h>

#include "core/core.h"

static uint32_t float_bits(float x)
{
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static float bits_float(uint32_t u)
{
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

uint16_t at_f32_to_bf16(float x)
{
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float at_bf16_to_f32(uint16_t h) { return bits_float((uint32_t)h << 16); }

uint16_t at_f32_to_f16(float x)
{
  uint32_t u = float_bits(x);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;
  if (abs >= 0x477ff000u) return sign | 0x7c00u; /* rounds to >= 65520: infinity */
  if (abs < 0x38800000u) {
    /* Subnormal or zero in fp16: scale so the fp16 quantum 2^-24 becomes one unit, then round. */
    float scaled = bits_float(abs) * 16777216.0f;
    return sign | (uint16_t)lrintf(scaled);
  }
  uint32_t mant = abs & 0x7fffffu;
  int exp = (int)(abs >> 23) - 127 + 15;
  uint32_t half = ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;
  return sign | (uint16_t)half;
}

float at_f16_to_f32(uint16_t h)
{
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((uint32_t)(exp - 15 + 127) << 23) | (mant << 13));
}
