/*
 * config.h — tuning configs (YAML, read with libyaml) and fleet shards. Prefixes tn_config_,
 * tn_shard_, tn_shape_. The format is documented field by field in docs/config.md.
 *
 * A config says which GPUs to use, which shapes to tune (lists and sweeps, expanded here into a
 * deduplicated list in a stable order), per-family search-space overrides, budgets, tolerances
 * and timing. Every error is AT_ERR_CONFIG with a message of the form
 *
 *     configs/x.yaml:7:12: shapes[1].dtype: unknown dtype 'bf17' (expected f32, f16, bf16, e4m3, e5m2)
 *
 * (1-based line and column of the offending node), except a file that cannot be read: AT_ERR_IO.
 */
#ifndef AT_TUNER_CONFIG_H
#define AT_TUNER_CONFIG_H

#include <stddef.h>

#include "attntune.h"
#include "generator/generator.h"

enum {
  TN_CONFIG_MAX_DEVICES = 64,
  TN_CONFIG_MAX_SHAPES = 100000, /* after expansion; a bigger sweep is refused */
  TN_CONFIG_GROUP_CAP = 64,      /* bytes of a group name, NUL included */
  TN_CONFIG_PATH_CAP = 1024,
  TN_SEARCH_MAX_VALUES = 16,     /* allowed values of one search parameter */
  TN_SHAPE_KEY_CAP = 128,        /* enough for any tn_shape_key */
  TN_SHARD_MAX = 65536,
};

/* Allowed values of one search parameter, in the order given, without repeats. n == 0: the
 * config does not restrict it (the family's own range applies). */
typedef struct tn_values {
  int n;
  int v[TN_SEARCH_MAX_VALUES];
} tn_values;

/* Search overrides of one kernel family; names as in generator.h's gen_variant. splits is
 * decode's alone (the split-KV families'); the config refuses it for fa2 and fa3, so there it is
 * always unrestricted. */
typedef struct tn_family_search {
  tn_values block_m, block_n, warps, stages, splits, ws, persistent, vt, tail, qr; /* ws..qr: fa3's alone */
} tn_family_search;

/* Indexed by gen_family, so the tuner finds a variant's overrides without naming families. */
typedef struct tn_search {
  tn_family_search family[GEN_FAMILY_COUNT];
} tn_search;

/* A shape entry's serving layout (docs/config.md, "Serving layouts"): ragged or paged tensors with
 * their per-sequence lengths; the at_shape beside it holds the batch and the maxima. Ordinary
 * shapes have padded Q and K/V and no lengths. */
typedef struct tn_serving_shape {
  at_serving_layout layout;
  int *q_lens, *kv_lens; /* batch each, owned by the config; NULL for padded tensors */
} tn_serving_shape;

enum { TN_SERVING_MAX_SEQUENCES = 4096 }; /* sequences of one ragged or paged shape */

typedef struct tn_config {
  char path[TN_CONFIG_PATH_CAP]; /* the file (or name) the config came from */

  int all_devices;               /* 1: every GPU of the host (devices: all, the default) */
  int devices[TN_CONFIG_MAX_DEVICES];
  int n_devices;                 /* ordinals in the order given, when !all_devices */

  at_shape *shapes;              /* expanded, deduplicated, in file order */
  char (*groups)[TN_CONFIG_GROUP_CAP]; /* the entry's name per shape ("" when unnamed) */
  tn_serving_shape *serving;     /* per shape: its layout and lengths */
  int n_shapes;

  tn_search search;

  int budget_candidates;         /* most candidates timed per shape; 0 = all */
  double budget_seconds;         /* per shape; 0 = no limit */

  double tolerance[AT_DTYPE_E5M2 + 1]; /* relative L2 per at_dtype; f32's is fixed (naive only) */

  int warmup;                    /* launches before timing */
  int reps;                      /* timed launches of the full pass (median) */
  int first_pass_reps;           /* timed launches of the cheap first pass; 0 = no first pass */
  double keep_fraction;          /* after the first pass keep this fraction (0, 1] ... */
  int keep_count;                /* ... or this many; exactly one of the two is non-zero */
} tn_config;

/* Defaults of every field and no shapes. */
void tn_config_init(tn_config *c);
/* Read and parse a file. AT_ERR_IO when it cannot be read, AT_ERR_CONFIG when it is malformed. */
at_status tn_config_load(const char *path, tn_config *out);
/* Parse YAML text; name is used in messages and copied to out->path. */
at_status tn_config_parse(const char *text, size_t len, const char *name, tn_config *out);
/* Free the shape lists; c is left as after tn_config_init. */
void tn_config_free(tn_config *c);

/* The first shape with ragged or paged tensors, or -1: what `bench --suite` does not run (`tune`
 * tunes them; `bench --lengths / --page-size` times one). */
int tn_config_first_serving(const tn_config *c);
/* AT_ERR_CONFIG naming that shape (its serving key and group) and why, or AT_OK when there is none. */
at_status tn_config_refuse_serving(const tn_config *c);

/* The search override of family/param ("fa2", "block_m"; "decode", "splits"), or NULL when the
 * family has no such parameter. */
const tn_values *tn_config_search(const tn_config *c, const char *family, const char *param);

/* at_shape_key plus ".scale<g>" for an explicit softmax scale: the identity of a config entry,
 * for deduplication and shards (the cache keys on at_shape_key, since no kernel choice depends
 * on the scale). buf should hold TN_SHAPE_KEY_CAP bytes. */
void tn_shape_key(const at_shape *s, char *buf, size_t size);

/* Parse "i/n" (0 <= i < n <= TN_SHARD_MAX); AT_ERR_INVALID with a message otherwise. */
at_status tn_shard_parse(const char *text, int *index, int *count);
/* The shapes of c largest first: order[rank] is a shape index, ranked by FLOPs with the key
 * breaking ties, so the order depends only on the set of shapes, not on the file. */
at_status tn_work_order(const tn_config *c, int *order);
/* Owner shard of each shape of c for a fleet of count shards: owner[i] in [0, count). Shapes are
 * ranked by FLOPs (largest first, key breaking ties) and dealt round-robin, so the shards are
 * disjoint, cover every shape, get counts within one of each other and a similar mix of big and
 * small shapes, and the split depends only on the set of shapes, not on their order in the file. */
at_status tn_shard_owners(const tn_config *c, int count, int *owner);
/* Keep only the shapes of shard index of count (in their original order). */
at_status tn_config_keep_shard(tn_config *c, int index, int count);

#endif
