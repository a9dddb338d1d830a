/*
 * fuzz_shape.c — libFuzzer target: arbitrary bytes as an at_shape (zero-padded when short) through
 * at_shape_check, at_shape_key and tn_shape_key (into buffers of every size from the input), and,
 * for a shape that passes the check, the scale, the FLOP count and each family's spec. Seeds:
 * a few real shapes, written by tests/fuzz/make_seeds.c.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "generator/generator.h"
#include "tuner/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  at_shape s;
  memset(&s, 0, sizeof s);
  memcpy(&s, data, size < sizeof s ? size : sizeof s);
  /* Bytes past the shape choose the key buffer's size (0 included: nothing may be written). */
  size_t cap = size > sizeof s ? data[sizeof s] % (TN_SHAPE_KEY_CAP + 1) : TN_SHAPE_KEY_CAP;
  char *buf = malloc(cap ? cap : 1);
  if (!buf) return 0;
  at_shape_key(&s, buf, cap);
  if (cap && strlen(buf) >= cap) abort();
  if (cap) tn_shape_key(&s, buf, cap);
  if (cap && strlen(buf) >= cap) abort();
  free(buf);
  if (at_shape_check(&s) != AT_OK) return 0;
  char key[TN_SHAPE_KEY_CAP];
  tn_shape_key(&s, key, sizeof key);
  if (strlen(key) + 1 >= sizeof key) abort(); /* TN_SHAPE_KEY_CAP is enough for any valid shape */
  float scale = at_shape_scale(&s);
  if (!(scale > 0.0f) || isinf(scale)) abort();
  /* at_shape_flops walks the query rows for a causal T != S: keep T small enough to stay fast. */
  if (s.q_len <= 1 << 16 && !(at_shape_flops(&s) >= 0.0)) abort();
  for (int f = 0; f < GEN_FAMILY_COUNT; f++) {
    gen_spec spec;
    (void)gen_spec_from_shape((gen_family)f, &s, &spec);
  }
  return 0;
}
