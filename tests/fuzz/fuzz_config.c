/*
 * fuzz_config.c — libFuzzer target: the tuning config parser (tn_config_parse) on arbitrary bytes
 * as YAML, then what the tuner does with a config that parses: shape keys, search overrides and
 * fleet shards. Seeds: configs/ and configs/bad/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  tn_config c;
  /* The text need not end in NUL: the parser reads exactly size bytes. */
  if (tn_config_parse((const char *)data, size, "fuzz.yaml", &c) != AT_OK) {
    if (c.shapes || c.n_shapes) abort(); /* a failed parse leaves nothing behind */
    return 0;
  }
  if (c.n_shapes < 1 || c.n_shapes > TN_CONFIG_MAX_SHAPES) abort();
  for (int i = 0; i < c.n_shapes; i++) {
    char key[TN_SHAPE_KEY_CAP];
    if (at_shape_check(&c.shapes[i]) != AT_OK) abort(); /* the parser checks every shape */
    tn_shape_key(&c.shapes[i], key, sizeof key);
    if (strlen(key) + 1 >= sizeof key) abort(); /* TN_SHAPE_KEY_CAP is "enough for any key" */
  }
  static const char *const FAMILIES[] = {"fa2", "fa3", "decode"};
  static const char *const PARAMS[] = {"block_m", "block_n", "warps", "stages", "splits"};
  for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++)
    for (size_t p = 0; p < sizeof PARAMS / sizeof *PARAMS; p++) {
      const tn_values *v = tn_config_search(&c, FAMILIES[f], PARAMS[p]);
      if (v && (v->n < 0 || v->n > TN_SEARCH_MAX_VALUES)) abort();
    }
  int count = 1 + (int)(size % 7);
  int *owner = malloc((size_t)c.n_shapes * sizeof *owner);
  if (owner && tn_shard_owners(&c, count, owner) == AT_OK) {
    for (int i = 0; i < c.n_shapes; i++)
      if (owner[i] < 0 || owner[i] >= count) abort();
    if (tn_config_keep_shard(&c, (int)(size % (size_t)count), count) != AT_OK) abort();
  }
  free(owner);
  tn_config_free(&c);
  return 0;
}
