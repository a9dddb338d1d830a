/*
 * config.c — the tuning config: YAML (libyaml's document API) to tn_config, sweep expansion with
 * deduplication, shape keys and fleet shards.
 *
 * The whole document is loaded first (yaml_parser_load), so every node keeps its start mark and
 * each error can point at the exact scalar, list item or key that is wrong. Aliases resolve to
 * shared nodes, so a config cannot blow up in memory through them. An event pass before the load
 * refuses nesting deeper than MAX_NESTING, which would cost libyaml quadratic time.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "runtime/rt.h"
#include "tuner/config.h"

enum { FIELD_CAP = 160, MESSAGE_CAP = 1024, FILE_CAP = 16 << 20 };

/* ---- defaults ---------------------------------------------------------------------------- */

void tn_config_init(tn_config *c)
{
  memset(c, 0, sizeof *c);
  c->all_devices = 1;
  /* docs/design.md's verification tolerances, from core's dtype table (f32's is a sanity bound of
   * the naive kernels, not a setting: tolerance.f32 is refused). */
  for (int d = 0; d <= AT_DTYPE_E5M2; d++) c->tolerance[d] = at_dtype_tolerance((at_dtype)d);
  c->warmup = 10;
  c->reps = 50;
  c->first_pass_reps = 5;
  c->keep_fraction = 0.5;
}

static void serving_shape_free(tn_serving_shape *v)
{
  if (v->q_lens != v->kv_lens) free(v->q_lens);
  free(v->kv_lens);
  v->q_lens = v->kv_lens = NULL;
}

void tn_config_free(tn_config *c)
{
  if (!c) return;
  for (int i = 0; c->serving && i < c->n_shapes; i++) serving_shape_free(&c->serving[i]);
  free(c->serving);
  free(c->shapes);
  free(c->groups);
  tn_config_init(c);
}

/* ---- parser state and messages ------------------------------------------------------------- */

typedef struct parser {
  const char *name; /* file name for messages */
  yaml_document_t *doc;
  tn_config *cfg;
  /* Dedup of expanded shapes: open addressing over indices into cfg->shapes (-1 = empty). */
  int *slots;
  size_t n_slots;
  int cap_shapes;
} parser;

/* "name:line:col: field: message" at node's start (libyaml marks are 0-based). */
static at_status fail_at(const parser *p, const yaml_node_t *node, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static at_status fail_at(const parser *p, const yaml_node_t *node, const char *field, const char *fmt, ...)
{
  char msg[MESSAGE_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t line = node ? node->start_mark.line + 1 : 1, col = node ? node->start_mark.column + 1 : 1;
  if (field && *field) return at_fail(AT_ERR_CONFIG, "%s:%zu:%zu: %s: %s", p->name, line, col, field, msg);
  return at_fail(AT_ERR_CONFIG, "%s:%zu:%zu: %s", p->name, line, col, msg);
}

/* Field paths are short (keys are checked against fixed names before they get here); a path cut
 * at FIELD_CAP would still point at the right node through the line and column. */
static void join_key(char *out, const char *parent, const char *key)
{
  if (snprintf(out, FIELD_CAP, "%s%s%s", parent, *parent ? "." : "", key) < 0) out[0] = '\0';
}

static void join_index(char *out, const char *parent, int index)
{
  if (snprintf(out, FIELD_CAP, "%s[%d]", parent, index) < 0) out[0] = '\0';
}

/* "a, b, c" for messages listing the allowed values. */
static const char *join_names(const char *const *names, int n, char *buf, size_t size)
{
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
  return buf;
}

/* ---- nodes ------------------------------------------------------------------------------- */

static yaml_node_t *node_at(const parser *p, int id) { return yaml_document_get_node(p->doc, id); }

static const char *text_of(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int is_plain(const yaml_node_t *n)
{
  return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* What a node is, for "expected X, got Y" messages. */
static const char *kind_of(const yaml_node_t *n)
{
  if (n->type == YAML_SEQUENCE_NODE) return "a list";
  if (n->type == YAML_MAPPING_NODE) return "a mapping";
  if (is_plain(n) && n->data.scalar.length == 0) return "nothing";
  return is_plain(n) ? "a value" : "a string";
}

static int map_size(const yaml_node_t *map)
{
  return (int)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
}

static int seq_size(const yaml_node_t *seq)
{
  return (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

static yaml_node_t *seq_item(const parser *p, const yaml_node_t *seq, int i)
{
  return node_at(p, seq->data.sequence.items.start[i]);
}

/* Value of key in map, or NULL (keys were checked for type and uniqueness by check_keys). */
static yaml_node_t *map_get(const parser *p, const yaml_node_t *map, const char *key)
{
  for (int i = 0; i < map_size(map); i++) {
    yaml_node_pair_t *pair = &map->data.mapping.pairs.start[i];
    if (strcmp(text_of(node_at(p, pair->key)), key) == 0) return node_at(p, pair->value);
  }
  return NULL;
}

static at_status expect_mapping(const parser *p, const yaml_node_t *n, const char *field, const char *what)
{
  if (n->type == YAML_MAPPING_NODE) return AT_OK;
  return fail_at(p, n, field, "expected a mapping of %s, got %s", what, kind_of(n));
}

/* Every key of map is a scalar from allowed[] and appears once. */
static at_status check_keys(const parser *p, const yaml_node_t *map, const char *field,
                            const char *const *allowed, int n_allowed)
{
  char names[512];
  for (int i = 0; i < map_size(map); i++) {
    yaml_node_t *key = node_at(p, map->data.mapping.pairs.start[i].key);
    if (key->type != YAML_SCALAR_NODE)
      return fail_at(p, key, field, "a key must be a name, got %s", kind_of(key));
    int known = 0;
    for (int j = 0; j < n_allowed && !known; j++) known = strcmp(text_of(key), allowed[j]) == 0;
    if (!known)
      return fail_at(p, key, field, "unknown key '%s' (expected %s)", text_of(key),
                     join_names(allowed, n_allowed, names, sizeof names));
    for (int j = 0; j < i; j++) {
      yaml_node_t *prev = node_at(p, map->data.mapping.pairs.start[j].key);
      if (prev->type == YAML_SCALAR_NODE && strcmp(text_of(prev), text_of(key)) == 0)
        return fail_at(p, key, field, "duplicate key '%s' (first given at line %zu)", text_of(key),
                       prev->start_mark.line + 1);
    }
  }
  return AT_OK;
}

/* ---- scalars ----------------------------------------------------------------------------- */

/* Numbers and booleans must be plain scalars: "64" in quotes is a string in YAML. */
static at_status expect_plain(const parser *p, const yaml_node_t *n, const char *field, const char *what)
{
  if (is_plain(n) && n->data.scalar.length > 0) return AT_OK;
  if (n->type == YAML_SCALAR_NODE && n->data.scalar.length > 0)
    return fail_at(p, n, field, "expected %s, got the string '%s'", what, text_of(n));
  return fail_at(p, n, field, "expected %s, got %s", what, kind_of(n));
}

static at_status read_int(const parser *p, const yaml_node_t *n, const char *field, long long lo,
                          long long hi, int *out)
{
  at_status rc = expect_plain(p, n, field, "an integer");
  if (rc != AT_OK) return rc;
  const char *text = text_of(n);
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0') return fail_at(p, n, field, "expected an integer, got '%s'", text);
  if (errno == ERANGE || v > hi) return fail_at(p, n, field, "%s is too large (at most %lld)", text, hi);
  if (v < lo) return fail_at(p, n, field, "%s must be at least %lld", text, lo);
  *out = (int)v;
  return AT_OK;
}

/* A finite number >= lo (> lo when lo_open) and <= hi. */
static at_status read_number(const parser *p, const yaml_node_t *n, const char *field, double lo, int lo_open,
                             double hi, double *out)
{
  at_status rc = expect_plain(p, n, field, "a number");
  if (rc != AT_OK) return rc;
  const char *text = text_of(n);
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v))
    return fail_at(p, n, field, "expected a number, got '%s'", text);
  if (lo_open ? !(v > lo) : !(v >= lo))
    return fail_at(p, n, field, "%s must be %s %g", text, lo_open ? "greater than" : "at least", lo);
  if (v > hi) return fail_at(p, n, field, "%s is too large (at most %g)", text, hi);
  *out = v;
  return AT_OK;
}

static at_status read_bool(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  static const char *const YES[] = {"true", "True", "TRUE"}, *const NO[] = {"false", "False", "FALSE"};
  at_status rc = expect_plain(p, n, field, "true or false");
  if (rc != AT_OK) return rc;
  for (int i = 0; i < 3; i++) {
    if (strcmp(text_of(n), YES[i]) == 0) return *out = 1, AT_OK;
    if (strcmp(text_of(n), NO[i]) == 0) return *out = 0, AT_OK;
  }
  return fail_at(p, n, field, "expected true or false, got '%s'", text_of(n));
}

/* ---- value lists: a scalar, a list of scalars and ranges, or a range ------------------------- */

/* Values of one field in the order given, each with the node it came from (for messages). */
typedef struct vlist {
  int n, cap;
  int *v;
  const yaml_node_t **at;
} vlist;

static void vlist_free(vlist *l)
{
  free(l->v);
  free(l->at);
  memset(l, 0, sizeof *l);
}

static at_status vlist_push(vlist *l, int v, const yaml_node_t *at)
{
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 8;
    int *nv = realloc(l->v, (size_t)cap * sizeof *nv);
    if (nv) l->v = nv;
    const yaml_node_t **nat = realloc(l->at, (size_t)cap * sizeof *nat);
    if (nat) l->at = nat;
    if (!nv || !nat) return at_fail(AT_ERR_NOMEM, "out of memory reading a config value list");
    l->cap = cap;
  }
  l->v[l->n] = v;
  l->at[l->n++] = at;
  return AT_OK;
}

/* Reads one scalar of a field's kind into *out. */
typedef at_status (*scalar_reader)(const parser *p, const yaml_node_t *n, const char *field, int *out);

/* {from: A, to: B, mul: M} (A, A*M, ... <= B) or {from: A, to: B, step: K} (A, A+K, ... <= B). */
static at_status read_range(const parser *p, const yaml_node_t *n, const char *field, vlist *out)
{
  static const char *const KEYS[] = {"from", "to", "mul", "step"};
  char sub[FIELD_CAP];
  at_status rc;
  if ((rc = check_keys(p, n, field, KEYS, 4)) != AT_OK) return rc;
  yaml_node_t *from = map_get(p, n, "from"), *to = map_get(p, n, "to");
  yaml_node_t *mul = map_get(p, n, "mul"), *step = map_get(p, n, "step");
  if (!from || !to)
    return fail_at(p, n, field, "a range needs 'from' and 'to' (e.g. {from: 64, to: 2048, mul: 2})");
  if (!mul == !step)
    return fail_at(p, n, field,
                   "a range needs exactly one of 'mul' and 'step' (e.g. {from: 1, to: 16, step: 1})");
  int a, b, k;
  join_key(sub, field, "from");
  if ((rc = read_int(p, from, sub, 1, INT_MAX, &a)) != AT_OK) return rc;
  join_key(sub, field, "to");
  if ((rc = read_int(p, to, sub, 1, INT_MAX, &b)) != AT_OK) return rc;
  if (b < a) return fail_at(p, to, sub, "%d is less than from (%d)", b, a);
  join_key(sub, field, mul ? "mul" : "step");
  if ((rc = read_int(p, mul ? mul : step, sub, mul ? 2 : 1, INT_MAX, &k)) != AT_OK) return rc;
  /* Refuse before allocating: a step range may be huge. */
  if (step && ((long long)b - a) / k + 1 > TN_CONFIG_MAX_SHAPES)
    return fail_at(p, n, field, "range from %d to %d step %d has %lld values (at most %d)", a, b, k,
                   ((long long)b - a) / k + 1, TN_CONFIG_MAX_SHAPES);
  for (long long v = a; v <= b; v = mul ? v * k : v + k)
    if ((rc = vlist_push(out, (int)v, n)) != AT_OK) return rc;
  return AT_OK;
}

/* A field's values: one scalar, a list (of scalars, and of ranges when allow_range), or a range. */
static at_status read_values(const parser *p, const yaml_node_t *n, const char *field, scalar_reader read,
                             int allow_range, vlist *out)
{
  at_status rc = AT_OK;
  int v;
  if (n->type == YAML_MAPPING_NODE) {
    if (!allow_range) return fail_at(p, n, field, "expected a value or a list, got a mapping");
    return read_range(p, n, field, out);
  }
  if (n->type == YAML_SCALAR_NODE) {
    if ((rc = read(p, n, field, &v)) != AT_OK) return rc;
    return vlist_push(out, v, n);
  }
  if (seq_size(n) == 0) return fail_at(p, n, field, "empty list (give at least one value)");
  for (int i = 0; i < seq_size(n); i++) {
    yaml_node_t *item = seq_item(p, n, i);
    char sub[FIELD_CAP];
    join_index(sub, field, i);
    if (item->type == YAML_MAPPING_NODE && allow_range)
      rc = read_range(p, item, sub, out);
    else if (item->type == YAML_SCALAR_NODE && (rc = read(p, item, sub, &v)) == AT_OK)
      rc = vlist_push(out, v, item);
    else if (item->type != YAML_SCALAR_NODE)
      rc = fail_at(p, item, sub, "expected a value%s, got %s", allow_range ? " or a range" : "",
                   kind_of(item));
    if (rc != AT_OK) return rc;
    /* Many large ranges in one list would otherwise allocate without bound. */
    if (out->n > TN_CONFIG_MAX_SHAPES)
      return fail_at(p, item, sub, "the list has more than %d values", TN_CONFIG_MAX_SHAPES);
  }
  return AT_OK;
}

static at_status read_any_int(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, INT_MIN, INT_MAX, out);
}

static at_status read_search_int(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, 1, 1024, out);
}

/* fa3's ws: 0 in-CTA pipeline, 1 warp-specialized, 2 warp-specialized with ping-pong. */
static at_status read_search_ws(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, 0, 2, out);
}

/* fa3's persistent: 0 one CTA per work tile, 1 one CTA per SM looping over them (.pers); fa3's
 * vt: 0 V^T in shared memory (FP8), 1 V^T written ahead by a first kernel (.vt); fa3's tail: 0
 * the plain grid, 1 the tail split for the device's SMs (.tw<W>); fa3's qr: 0 Q K^T reads Q from
 * shared memory, 1 from registers (.qr). */
static at_status read_search_flag(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, 0, 1, out);
}

static at_status read_dtype(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  at_dtype d;
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0)
    return fail_at(p, n, field, "expected a dtype (f32, f16, bf16, e4m3, e5m2), got %s", kind_of(n));
  /* f32 is accepted: such a shape has no fused kernel and no cuDNN baseline, and the tuner times
   * the naive kernels on it (tune.c). */
  if (at_dtype_parse(text_of(n), &d) != AT_OK)
    return fail_at(p, n, field, "unknown dtype '%s' (expected f32, f16, bf16, e4m3, e5m2)", text_of(n));
  *out = (int)d;
  return AT_OK;
}

static at_status read_page_size(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  at_status rc = read_int(p, n, field, INT_MIN, INT_MAX, out);
  if (rc == AT_OK && !at_page_size_allowed(*out))
    return fail_at(p, n, field, "page size %d not allowed (expected %s)", *out, at_page_sizes_text());
  return rc;
}

static at_status read_mask(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  at_mask m;
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0)
    return fail_at(p, n, field, "expected a mask (none, causal, causal-br), got %s", kind_of(n));
  if (at_mask_parse(text_of(n), &m) != AT_OK)
    return fail_at(p, n, field, "unknown mask '%s' (expected none, causal, causal-br)", text_of(n));
  *out = (int)m;
  return AT_OK;
}

/* ---- shapes ------------------------------------------------------------------------------ */

/* The sweepable fields of a shape entry. Expansion varies the first slowest and the last fastest. */
enum field_id {
  F_BATCH,
  F_SEQ_LEN,
  F_Q_LEN,
  F_KV_LEN,
  F_Q_HEADS,
  F_KV_HEADS,
  F_HEAD_DIM,
  F_DTYPE,
  F_KV_DTYPE,
  F_MASK,
  F_LSE,
  F_PAGE_SIZE,
  F_COUNT
};

static const struct shape_field {
  const char *name;
  scalar_reader read;
  int is_int; /* may be a range; each value checked with at_shape_check */
} FIELDS[F_COUNT] = {
    [F_BATCH] = {"batch", read_any_int, 1},
    [F_SEQ_LEN] = {"seq_len", read_any_int, 1},
    [F_Q_LEN] = {"q_len", read_any_int, 1},
    [F_KV_LEN] = {"kv_len", read_any_int, 1},
    [F_Q_HEADS] = {"q_heads", read_any_int, 1},
    [F_KV_HEADS] = {"kv_heads", read_any_int, 1},
    [F_HEAD_DIM] = {"head_dim", read_any_int, 1},
    [F_DTYPE] = {"dtype", read_dtype, 0},
    [F_KV_DTYPE] = {"kv_dtype", read_dtype, 0}, /* K and V; absent: the dtype */
    [F_MASK] = {"mask", read_mask, 0},
    [F_LSE] = {"lse", read_bool, 0},
    [F_PAGE_SIZE] = {"page_size", read_page_size, 0}, /* K/V paged; absent: not */
};

static const char *const ENTRY_KEYS[] = {"name",     "batch",    "seq_len", "q_len",    "kv_len", "q_heads",
                                         "kv_heads", "head_dim", "dtype",   "kv_dtype", "mask",   "lse",
                                         "lengths",  "page_size"};
enum { N_ENTRY_KEYS = sizeof ENTRY_KEYS / sizeof *ENTRY_KEYS };

/* One value of an int field on its own, so the message (at_shape_check's own) points at it. */
static at_status check_one_value(const parser *p, enum field_id f, int v, const yaml_node_t *at,
                                 const char *field)
{
  if (f == F_SEQ_LEN) {
    if (v < 1) return fail_at(p, at, field, "seq_len %d must be at least 1", v);
    if (v > AT_MAX_SEQ_LEN)
      return fail_at(p, at, field, "seq_len %d out of range (expected 1..%d: row indices are int in the kernels)", v,
                     AT_MAX_SEQ_LEN);
    return AT_OK;
  }
  at_shape s = {.batch = 1,
                .q_len = 1,
                .kv_len = 1,
                .q_heads = 1,
                .kv_heads = 1,
                .head_dim = 64,
                .dtype = AT_DTYPE_BF16,
                .mask = AT_MASK_NONE};
  int *slot[F_COUNT] = {[F_BATCH] = &s.batch,     [F_Q_LEN] = &s.q_len,       [F_KV_LEN] = &s.kv_len,
                        [F_Q_HEADS] = &s.q_heads, [F_KV_HEADS] = &s.kv_heads, [F_HEAD_DIM] = &s.head_dim};
  *slot[f] = v;
  if (f == F_KV_HEADS) s.q_heads = v > 0 ? v : 1; /* divisibility is checked per combination */
  if (at_shape_check(&s) != AT_OK) return fail_at(p, at, field, "%s", at_last_error());
  return AT_OK;
}

static int serving_equal(const tn_serving_shape *a, const tn_serving_shape *b, int batch)
{
  const at_serving_layout *x = &a->layout, *y = &b->layout;
  if (x->q_layout != y->q_layout || x->kv_layout != y->kv_layout || x->page_size != y->page_size) return 0;
  if (!a->kv_lens || !b->kv_lens) return !a->kv_lens && !b->kv_lens;
  return memcmp(a->q_lens, b->q_lens, (size_t)batch * sizeof *a->q_lens) == 0 &&
         memcmp(a->kv_lens, b->kv_lens, (size_t)batch * sizeof *a->kv_lens) == 0;
}

static int shape_equal(const at_shape *a, const at_shape *b)
{
  return a->batch == b->batch && a->q_len == b->q_len && a->kv_len == b->kv_len && a->q_heads == b->q_heads &&
         a->kv_heads == b->kv_heads && a->head_dim == b->head_dim && a->dtype == b->dtype &&
         at_shape_kv_dtype(a) == at_shape_kv_dtype(b) &&
         a->mask == b->mask && a->scale == b->scale && !a->with_lse == !b->with_lse;
}

static uint64_t fnv1a(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Shapes that differ only in their lengths share a key (the maxima): equality tells them apart. */
static size_t shape_slot(const parser *p, const at_shape *s, const tn_serving_shape *v, int *found)
{
  char key[TN_SHAPE_KEY_CAP];
  tn_shape_key(s, key, sizeof key);
  size_t mask = p->n_slots - 1, i = (size_t)fnv1a(key) & mask;
  for (; p->slots[i] >= 0; i = (i + 1) & mask)
    if (shape_equal(&p->cfg->shapes[p->slots[i]], s) && serving_equal(&p->cfg->serving[p->slots[i]], v, s->batch))
      return *found = 1, i;
  *found = 0;
  return i;
}

/* Keep the table at most half full so probes stay short. */
static at_status grow_slots(parser *p)
{
  size_t n = p->n_slots ? 2 * p->n_slots : 1024;
  int *slots = malloc(n * sizeof *slots);
  if (!slots) return at_fail(AT_ERR_NOMEM, "out of memory expanding config shapes");
  free(p->slots);
  p->slots = slots;
  p->n_slots = n;
  for (size_t i = 0; i < n; i++) slots[i] = -1;
  for (int k = 0; k < p->cfg->n_shapes; k++) {
    int found;
    p->slots[shape_slot(p, &p->cfg->shapes[k], &p->cfg->serving[k], &found)] = k;
  }
  return AT_OK;
}

/* Append s unless an equal shape is already there (the first occurrence keeps its group). The
 * config takes v's lengths either way (a duplicate's are freed). */
static at_status add_shape(parser *p, const at_shape *s, tn_serving_shape *v, const char *group)
{
  tn_config *c = p->cfg;
  at_status rc;
  if ((size_t)(c->n_shapes + 1) * 2 > p->n_slots && (rc = grow_slots(p)) != AT_OK) return serving_shape_free(v), rc;
  int found;
  size_t slot = shape_slot(p, s, v, &found);
  if (found) return serving_shape_free(v), AT_OK;
  if (c->n_shapes == p->cap_shapes) {
    int cap = p->cap_shapes ? 2 * p->cap_shapes : 64;
    at_shape *shapes = realloc(c->shapes, (size_t)cap * sizeof *shapes);
    if (shapes) c->shapes = shapes;
    char(*groups)[TN_CONFIG_GROUP_CAP] = realloc(c->groups, (size_t)cap * sizeof *groups);
    if (groups) c->groups = groups;
    tn_serving_shape *serving = realloc(c->serving, (size_t)cap * sizeof *serving);
    if (serving) c->serving = serving;
    if (!shapes || !groups || !serving)
      return serving_shape_free(v), at_fail(AT_ERR_NOMEM, "out of memory expanding config shapes");
    p->cap_shapes = cap;
  }
  c->serving[c->n_shapes] = *v;
  c->shapes[c->n_shapes] = *s;
  snprintf(c->groups[c->n_shapes], TN_CONFIG_GROUP_CAP, "%s", group);
  p->slots[slot] = c->n_shapes++;
  return AT_OK;
}

/* An entry's fields after reading: one list per field, empty when the field does not vary on
 * its own (seq_len unused, q_len/kv_len given by seq_len, kv_heads following q_heads). */
typedef struct entry {
  const yaml_node_t *node;
  char field[FIELD_CAP]; /* "shapes[i]" */
  char group[TN_CONFIG_GROUP_CAP];
  vlist vals[F_COUNT];
  /* lengths: a list (vals of lengths, batch = its size) or {dist: uniform, min, max, seed} */
  const yaml_node_t *lengths_node;
  vlist lengths;
  int uniform, min_len, max_len, seed;
} entry;

static void entry_free(entry *e)
{
  for (int f = 0; f < F_COUNT; f++) vlist_free(&e->vals[f]);
  vlist_free(&e->lengths);
}

static at_status read_length(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, 0, AT_MAX_SEQ_LEN, out);
}

/* {dist: uniform, min: N, max: N, seed: N}: the lengths at_lengths_uniform draws for each batch. */
static at_status read_length_dist(const parser *p, const yaml_node_t *n, const char *field, entry *e)
{
  static const char *const KEYS[] = {"dist", "min", "max", "seed"};
  char sub[FIELD_CAP];
  at_status rc;
  yaml_node_t *v;
  if ((rc = check_keys(p, n, field, KEYS, 4)) != AT_OK) return rc;
  join_key(sub, field, "dist");
  if (!(v = map_get(p, n, "dist"))) return fail_at(p, n, field, "missing 'dist' (the only one is uniform)");
  if (v->type != YAML_SCALAR_NODE || strcmp(text_of(v), "uniform") != 0)
    return fail_at(p, v, sub, "unknown length distribution '%s' (expected uniform)",
                   v->type == YAML_SCALAR_NODE ? text_of(v) : kind_of(v));
  int *out[2] = {&e->min_len, &e->max_len};
  for (int i = 0; i < 2; i++) {
    join_key(sub, field, KEYS[1 + i]);
    if (!(v = map_get(p, n, KEYS[1 + i]))) return fail_at(p, n, field, "missing '%s'", KEYS[1 + i]);
    if ((rc = read_length(p, v, sub, out[i])) != AT_OK) return rc;
  }
  if (e->max_len < e->min_len)
    return fail_at(p, map_get(p, n, "max"), field, "max %d is below min %d", e->max_len, e->min_len);
  e->seed = 1;
  join_key(sub, field, "seed");
  if ((v = map_get(p, n, "seed")) && (rc = read_int(p, v, sub, 0, INT_MAX, &e->seed)) != AT_OK) return rc;
  e->uniform = 1;
  return AT_OK;
}

static at_status read_entry_lengths(const parser *p, entry *e)
{
  yaml_node_t *n = map_get(p, e->node, "lengths");
  char sub[FIELD_CAP];
  at_status rc;
  if (!n) return AT_OK;
  join_key(sub, e->field, "lengths");
  e->lengths_node = n;
  if (n->type == YAML_MAPPING_NODE) return read_length_dist(p, n, sub, e);
  if (n->type != YAML_SEQUENCE_NODE)
    return fail_at(p, n, sub, "expected a list of lengths or {dist: uniform, min, max, seed}, got %s", kind_of(n));
  if ((rc = read_values(p, n, sub, read_length, 0, &e->lengths)) != AT_OK) return rc;
  if (e->lengths.n > TN_SERVING_MAX_SEQUENCES)
    return fail_at(p, n, sub, "%d lengths: at most %d sequences", e->lengths.n, TN_SERVING_MAX_SEQUENCES);
  return AT_OK;
}

static at_status read_entry_fields(const parser *p, entry *e)
{
  at_status rc;
  char sub[FIELD_CAP];
  for (int f = 0; f < F_COUNT; f++) {
    yaml_node_t *n = map_get(p, e->node, FIELDS[f].name);
    if (!n) continue;
    join_key(sub, e->field, FIELDS[f].name);
    if ((rc = read_values(p, n, sub, FIELDS[f].read, FIELDS[f].is_int, &e->vals[f])) != AT_OK) return rc;
    for (int i = 0; FIELDS[f].is_int && i < e->vals[f].n; i++)
      if ((rc = check_one_value(p, (enum field_id)f, e->vals[f].v[i], e->vals[f].at[i], sub)) != AT_OK)
        return rc;
  }
  return AT_OK;
}

static at_status read_entry_name(const parser *p, entry *e)
{
  yaml_node_t *n = map_get(p, e->node, "name");
  char sub[FIELD_CAP];
  if (!n) return AT_OK;
  join_key(sub, e->field, "name");
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.length == 0)
    return fail_at(p, n, sub, "expected a group name, got %s", kind_of(n));
  if (n->data.scalar.length >= TN_CONFIG_GROUP_CAP)
    return fail_at(p, n, sub, "name '%s' is longer than %d characters", text_of(n), TN_CONFIG_GROUP_CAP - 1);
  snprintf(e->group, sizeof e->group, "%s", text_of(n));
  return AT_OK;
}

/* Required fields, seq_len vs q_len/kv_len, and defaults for the rest. */
/* lengths give B and the K/V lengths: kv_len and seq_len go, q_len stays optional (padded queries). */
static at_status complete_serving_entry(const parser *p, entry *e)
{
  vlist *v = e->vals;
  char sub[FIELD_CAP];
  const char *clash = v[F_SEQ_LEN].n ? "seq_len" : v[F_KV_LEN].n ? "kv_len" : NULL;
  if (clash) {
    join_key(sub, e->field, clash);
    return fail_at(p, map_get(p, e->node, clash), sub,
                   "lengths give the K/V lengths: drop %s (q_len gives padded queries)", clash);
  }
  for (int i = 0; !e->uniform && i < v[F_BATCH].n; i++)
    if (v[F_BATCH].v[i] != e->lengths.n) {
      join_key(sub, e->field, "batch");
      return fail_at(p, v[F_BATCH].at[i], sub, "batch %d differs from the %d lengths listed", v[F_BATCH].v[i],
                     e->lengths.n);
    }
  for (int i = 0; e->uniform && i < v[F_BATCH].n; i++)
    if (v[F_BATCH].v[i] > TN_SERVING_MAX_SEQUENCES) {
      join_key(sub, e->field, "batch");
      return fail_at(p, v[F_BATCH].at[i], sub, "batch %d: at most %d sequences with lengths", v[F_BATCH].v[i],
                     TN_SERVING_MAX_SEQUENCES);
    }
  if (!v[F_BATCH].n) return vlist_push(&v[F_BATCH], e->uniform ? 1 : e->lengths.n, e->node);
  return AT_OK;
}

static at_status complete_entry(const parser *p, entry *e)
{
  vlist *v = e->vals;
  at_status rc;
  if (e->lengths_node) {
    if ((rc = complete_serving_entry(p, e)) != AT_OK) return rc;
  } else if (v[F_PAGE_SIZE].n) {
    char sub[FIELD_CAP];
    join_key(sub, e->field, "batch");
    for (int i = 0; i < v[F_BATCH].n; i++)
      if (v[F_BATCH].v[i] > TN_SERVING_MAX_SEQUENCES)
        return fail_at(p, v[F_BATCH].at[i], sub, "batch %d: at most %d sequences with page_size", v[F_BATCH].v[i],
                       TN_SERVING_MAX_SEQUENCES);
  }
  if (!e->lengths_node && v[F_SEQ_LEN].n && (v[F_Q_LEN].n || v[F_KV_LEN].n)) {
    const char *name = v[F_Q_LEN].n ? "q_len" : "kv_len";
    char sub[FIELD_CAP];
    join_key(sub, e->field, name);
    return fail_at(p, map_get(p, e->node, name), sub, "give either seq_len or q_len and kv_len, not both");
  }
  if (!e->lengths_node && !v[F_SEQ_LEN].n && (!v[F_Q_LEN].n || !v[F_KV_LEN].n))
    return fail_at(p, e->node, e->field, "missing '%s' (or 'seq_len' for both lengths)",
                   v[F_Q_LEN].n ? "kv_len" : "q_len");
  if (!v[F_Q_HEADS].n) return fail_at(p, e->node, e->field, "missing 'q_heads'");
  if (!v[F_HEAD_DIM].n) return fail_at(p, e->node, e->field, "missing 'head_dim'");
  if (!v[F_BATCH].n && (rc = vlist_push(&v[F_BATCH], 1, e->node)) != AT_OK) return rc;
  if (!v[F_DTYPE].n && (rc = vlist_push(&v[F_DTYPE], AT_DTYPE_BF16, e->node)) != AT_OK) return rc;
  if (!v[F_MASK].n && (rc = vlist_push(&v[F_MASK], AT_MASK_NONE, e->node)) != AT_OK) return rc;
  if (!v[F_LSE].n && (rc = vlist_push(&v[F_LSE], 0, e->node)) != AT_OK) return rc;
  return AT_OK;
}

/* The shape at odometer position idx (a value index per field; fields without values skipped). */
static at_shape combination(const entry *e, const int *idx)
{
  int val[F_COUNT] = {0};
  for (int f = 0; f < F_COUNT; f++)
    if (e->vals[f].n) val[f] = e->vals[f].v[idx[f]];
  at_shape s = {.batch = val[F_BATCH],
                .q_len = val[F_Q_LEN],
                .kv_len = val[F_KV_LEN],
                .q_heads = val[F_Q_HEADS],
                .kv_heads = val[F_KV_HEADS],
                .head_dim = val[F_HEAD_DIM],
                .dtype = (at_dtype)val[F_DTYPE],
                .mask = (at_mask)val[F_MASK],
                .with_lse = val[F_LSE],
                .kv_dtype = (at_dtype)val[F_KV_DTYPE]};
  if (s.kv_dtype == s.dtype) s.kv_dtype = AT_KV_SAME; /* one spelling of "K and V in the dtype" */
  if (e->vals[F_SEQ_LEN].n) s.q_len = s.kv_len = val[F_SEQ_LEN];
  if (!e->vals[F_KV_HEADS].n) s.kv_heads = s.q_heads;
  return s;
}

/* The lengths and layout of combination idx, with s's maxima set from them: K/V paged at
 * page_size, else ragged when lengths are given; Q ragged with the K/V lengths unless q_len is. */
static at_status serving_combination(const entry *e, const int *idx, at_shape *s, tn_serving_shape *v)
{
  const int page = e->vals[F_PAGE_SIZE].n ? e->vals[F_PAGE_SIZE].v[idx[F_PAGE_SIZE]] : 0;
  memset(v, 0, sizeof *v);
  v->layout = at_serving_layout_make(s, AT_SEQ_PADDED, AT_SEQ_PADDED, 0);
  if (!e->lengths_node && !page) return AT_OK;
  if (s->batch < 1) return at_fail(AT_ERR_INVALID, "batch %d must be at least 1", s->batch);
  if (!(v->kv_lens = malloc((size_t)s->batch * sizeof *v->kv_lens)))
    return at_fail(AT_ERR_NOMEM, "out of memory expanding lengths");
  at_status rc = AT_OK;
  if (e->uniform) rc = at_lengths_uniform(e->min_len, e->max_len, (uint64_t)e->seed, s->batch, v->kv_lens);
  else if (e->lengths_node) memcpy(v->kv_lens, e->lengths.v, (size_t)s->batch * sizeof *v->kv_lens);
  else for (int i = 0; i < s->batch; i++) v->kv_lens[i] = s->kv_len;
  const int q_ragged = e->lengths_node && !e->vals[F_Q_LEN].n;
  v->q_lens = q_ragged ? v->kv_lens : malloc((size_t)s->batch * sizeof *v->q_lens);
  if (rc == AT_OK && !v->q_lens) rc = at_fail(AT_ERR_NOMEM, "out of memory expanding lengths");
  if (rc != AT_OK) return serving_shape_free(v), rc;
  int longest = 1;
  for (int i = 0; i < s->batch; i++) longest = v->kv_lens[i] > longest ? v->kv_lens[i] : longest;
  for (int i = 0; !q_ragged && i < s->batch; i++) v->q_lens[i] = s->q_len;
  s->kv_len = longest;
  if (q_ragged) s->q_len = longest;
  const at_seq_layout kv = page ? AT_SEQ_PAGED : AT_SEQ_RAGGED;
  v->layout = at_serving_layout_make(s, q_ragged ? AT_SEQ_RAGGED : AT_SEQ_PADDED, kv, page);
  return AT_OK;
}

/* A combination at_shape_check refuses; after the per-value checks only Nq % Nkv and the pairing
 * of dtype and kv_dtype are left. */
static at_status fail_combination(const parser *p, const entry *e, const int *idx, const at_shape *s)
{
  char sub[FIELD_CAP];
  enum field_id f = F_COUNT;
  if (s->kv_heads > 0 && s->q_heads % s->kv_heads != 0) f = e->vals[F_KV_HEADS].n ? F_KV_HEADS : F_Q_HEADS;
  else if (at_shape_kv_dtype(s) != s->dtype) f = e->vals[F_KV_DTYPE].n ? F_KV_DTYPE : F_DTYPE;
  if (f == F_COUNT || !e->vals[f].n) return fail_at(p, e->node, e->field, "%s", at_last_error());
  join_key(sub, e->field, FIELDS[f].name);
  return fail_at(p, e->vals[f].at[idx[f]], sub, "%s", at_last_error());
}

static at_status expand_entry(parser *p, const entry *e)
{
  double total = 1;
  for (int f = 0; f < F_COUNT; f++)
    if (e->vals[f].n) total *= e->vals[f].n;
  if (total + p->cfg->n_shapes > TN_CONFIG_MAX_SHAPES)
    return fail_at(p, e->node, e->field,
                   "the sweep expands to %.0f shapes, %d with the entries before it (at most %d)", total,
                   p->cfg->n_shapes, TN_CONFIG_MAX_SHAPES);
  int idx[F_COUNT] = {0};
  at_status rc;
  for (;;) {
    at_shape s = combination(e, idx);
    tn_serving_shape v;
    if ((rc = serving_combination(e, idx, &s, &v)) != AT_OK) return fail_at(p, e->node, e->field, "%s", at_last_error());
    if (at_shape_check(&s) != AT_OK) return serving_shape_free(&v), fail_combination(p, e, idx, &s);
    if ((rc = add_shape(p, &s, &v, e->group)) != AT_OK) return rc;
    int f = F_COUNT - 1;
    for (; f >= 0; f--) {
      if (!e->vals[f].n) continue;
      if (++idx[f] < e->vals[f].n) break;
      idx[f] = 0;
    }
    if (f < 0) return AT_OK;
  }
}

static at_status parse_entry(parser *p, const yaml_node_t *n, int index)
{
  entry e;
  memset(&e, 0, sizeof e);
  e.node = n;
  join_index(e.field, "shapes", index);
  char keys[512];
  if (n->type != YAML_MAPPING_NODE)
    return fail_at(p, n, e.field, "expected a mapping with %s, got %s",
                   join_names(ENTRY_KEYS, N_ENTRY_KEYS, keys, sizeof keys), kind_of(n));
  at_status rc;
  if ((rc = check_keys(p, n, e.field, ENTRY_KEYS, N_ENTRY_KEYS)) == AT_OK &&
      (rc = read_entry_name(p, &e)) == AT_OK && (rc = read_entry_fields(p, &e)) == AT_OK &&
      (rc = read_entry_lengths(p, &e)) == AT_OK && (rc = complete_entry(p, &e)) == AT_OK)
    rc = expand_entry(p, &e);
  entry_free(&e);
  return rc;
}

static at_status parse_shapes(parser *p, const yaml_node_t *n)
{
  if (n->type != YAML_SEQUENCE_NODE)
    return fail_at(p, n, "shapes", "expected a list of shape entries, got %s", kind_of(n));
  if (seq_size(n) == 0) return fail_at(p, n, "shapes", "empty list (give at least one shape entry)");
  at_status rc;
  for (int i = 0; i < seq_size(n); i++)
    if ((rc = parse_entry(p, seq_item(p, n, i), i)) != AT_OK) return rc;
  return AT_OK;
}

/* ---- devices ----------------------------------------------------------------------------- */

static at_status read_device(const parser *p, const yaml_node_t *n, const char *field, int *out)
{
  return read_int(p, n, field, 0, TN_CONFIG_MAX_DEVICES - 1, out);
}

static at_status parse_devices(const parser *p, const yaml_node_t *n)
{
  tn_config *c = p->cfg;
  if (n->type == YAML_SCALAR_NODE && strcmp(text_of(n), "all") == 0) return AT_OK;
  /* Anything but a list, an ordinal or 'all' gets one message naming both forms. */
  if (n->type == YAML_MAPPING_NODE)
    return fail_at(p, n, "devices", "expected 'all' or a list of GPU ordinals, got a mapping");
  if (n->type == YAML_SCALAR_NODE && (!is_plain(n) || !isdigit((unsigned char)text_of(n)[0])))
    return fail_at(p, n, "devices", "expected 'all' or a list of GPU ordinals, got '%s'", text_of(n));
  vlist l = {0};
  at_status rc = read_values(p, n, "devices", read_device, 0, &l);
  for (int i = 0; rc == AT_OK && i < l.n; i++)
    for (int j = 0; j < i && rc == AT_OK; j++)
      if (l.v[j] == l.v[i]) rc = fail_at(p, l.at[i], "devices", "GPU %d is listed twice", l.v[i]);
  if (rc == AT_OK) {
    c->all_devices = 0;
    c->n_devices = l.n; /* at most 64: ordinals are 0..63 and distinct */
    memcpy(c->devices, l.v, (size_t)l.n * sizeof *l.v);
  }
  vlist_free(&l);
  return rc;
}

/* ---- search ------------------------------------------------------------------------------ */

/* The parameters a config may restrict, per family: the tiling every family has, and the split
 * count of the split-KV family (decode). A family missing here cannot be named under search. */
static const struct search_param {
  gen_family family;
  const char *param;
  size_t offset; /* of the tn_values in tn_family_search */
} SEARCH[] = {
    {GEN_FAMILY_FA2, "block_m", offsetof(tn_family_search, block_m)},
    {GEN_FAMILY_FA2, "block_n", offsetof(tn_family_search, block_n)},
    {GEN_FAMILY_FA2, "warps", offsetof(tn_family_search, warps)},
    {GEN_FAMILY_FA2, "stages", offsetof(tn_family_search, stages)},
    {GEN_FAMILY_FA3, "block_m", offsetof(tn_family_search, block_m)},
    {GEN_FAMILY_FA3, "block_n", offsetof(tn_family_search, block_n)},
    {GEN_FAMILY_FA3, "warps", offsetof(tn_family_search, warps)},
    {GEN_FAMILY_FA3, "stages", offsetof(tn_family_search, stages)},
    {GEN_FAMILY_FA3, "ws", offsetof(tn_family_search, ws)},
    {GEN_FAMILY_FA3, "persistent", offsetof(tn_family_search, persistent)},
    {GEN_FAMILY_FA3, "vt", offsetof(tn_family_search, vt)},
    {GEN_FAMILY_FA3, "tail", offsetof(tn_family_search, tail)},
    {GEN_FAMILY_FA3, "qr", offsetof(tn_family_search, qr)},
    {GEN_FAMILY_DECODE, "block_m", offsetof(tn_family_search, block_m)},
    {GEN_FAMILY_DECODE, "block_n", offsetof(tn_family_search, block_n)},
    {GEN_FAMILY_DECODE, "warps", offsetof(tn_family_search, warps)},
    {GEN_FAMILY_DECODE, "stages", offsetof(tn_family_search, stages)},
    {GEN_FAMILY_DECODE, "splits", offsetof(tn_family_search, splits)},
};
enum { N_SEARCH = sizeof SEARCH / sizeof *SEARCH };
static const char *const FAMILIES[] = {"fa2", "fa3", "decode"}; /* gen_family_name of each above */
enum { N_FAMILIES = sizeof FAMILIES / sizeof *FAMILIES };

static tn_values *search_slot(tn_search *s, const char *family, const char *param)
{
  int f = gen_family_of_name(family, strlen(family));
  if (f < 0) return NULL;
  for (int i = 0; i < N_SEARCH; i++)
    if ((int)SEARCH[i].family == f && strcmp(SEARCH[i].param, param) == 0)
      return (tn_values *)((char *)&s->family[f] + SEARCH[i].offset);
  return NULL;
}

const tn_values *tn_config_search(const tn_config *c, const char *family, const char *param)
{
  return search_slot((tn_search *)&c->search, family, param);
}

/* Values of one parameter, repeats dropped, at most TN_SEARCH_MAX_VALUES. */
static at_status parse_search_param(const parser *p, const yaml_node_t *n, const char *field, const char *param,
                                    tn_values *out)
{
  vlist l = {0};
  at_status rc = read_values(p, n, field,
                             strcmp(param, "ws") == 0                                          ? read_search_ws
                             : strcmp(param, "persistent") == 0 || strcmp(param, "vt") == 0 ||
                                     strcmp(param, "tail") == 0 || strcmp(param, "qr") == 0
                                 ? read_search_flag
                                                                                             : read_search_int,
                             1, &l);
  out->n = 0;
  for (int i = 0; rc == AT_OK && i < l.n; i++) {
    int seen = 0;
    for (int j = 0; j < out->n && !seen; j++) seen = out->v[j] == l.v[i];
    if (seen) continue;
    if (out->n == TN_SEARCH_MAX_VALUES)
      rc = fail_at(p, l.at[i], field, "more than %d distinct values", TN_SEARCH_MAX_VALUES);
    else
      out->v[out->n++] = l.v[i];
  }
  vlist_free(&l);
  return rc;
}

static at_status parse_family(const parser *p, const char *family, const yaml_node_t *n)
{
  const char *params[N_SEARCH];
  int n_params = 0, f = gen_family_of_name(family, strlen(family)); /* a FAMILIES name: check_keys ran */
  char field[FIELD_CAP], sub[FIELD_CAP];
  at_status rc;
  for (int i = 0; i < N_SEARCH; i++)
    if ((int)SEARCH[i].family == f) params[n_params++] = SEARCH[i].param;
  join_key(field, "search", family);
  if ((rc = expect_mapping(p, n, field, "parameters to lists of values")) != AT_OK) return rc;
  if ((rc = check_keys(p, n, field, params, n_params)) != AT_OK) return rc;
  for (int i = 0; i < map_size(n); i++) {
    yaml_node_pair_t *pair = &n->data.mapping.pairs.start[i];
    const char *param = text_of(node_at(p, pair->key));
    join_key(sub, field, param);
    if ((rc = parse_search_param(p, node_at(p, pair->value), sub, param,
                                 search_slot(&p->cfg->search, family, param))) != AT_OK)
      return rc;
  }
  return AT_OK;
}

static at_status parse_search(const parser *p, const yaml_node_t *n)
{
  at_status rc;
  if ((rc = expect_mapping(p, n, "search", "kernel families")) != AT_OK) return rc;
  if ((rc = check_keys(p, n, "search", FAMILIES, N_FAMILIES)) != AT_OK) return rc;
  for (int i = 0; i < map_size(n); i++) {
    yaml_node_pair_t *pair = &n->data.mapping.pairs.start[i];
    if ((rc = parse_family(p, text_of(node_at(p, pair->key)), node_at(p, pair->value))) != AT_OK) return rc;
  }
  return AT_OK;
}

/* ---- budget, tolerance, timing ------------------------------------------------------------ */

static at_status parse_budget(const parser *p, const yaml_node_t *n)
{
  static const char *const KEYS[] = {"candidates", "seconds"};
  tn_config *c = p->cfg;
  at_status rc;
  yaml_node_t *v;
  if ((rc = expect_mapping(p, n, "budget", "candidates and seconds")) != AT_OK) return rc;
  if ((rc = check_keys(p, n, "budget", KEYS, 2)) != AT_OK) return rc;
  if ((v = map_get(p, n, "candidates")) &&
      (rc = read_int(p, v, "budget.candidates", 0, INT_MAX, &c->budget_candidates)) != AT_OK)
    return rc;
  if ((v = map_get(p, n, "seconds")) &&
      (rc = read_number(p, v, "budget.seconds", 0, 0, 1e9, &c->budget_seconds)) != AT_OK)
    return rc;
  return AT_OK;
}

static at_status parse_tolerance(const parser *p, const yaml_node_t *n)
{
  static const char *const KEYS[] = {"f16", "bf16", "e4m3", "e5m2"};
  char sub[FIELD_CAP];
  at_status rc;
  if ((rc = expect_mapping(p, n, "tolerance", "dtypes to relative L2 errors")) != AT_OK) return rc;
  for (int i = 0; i < map_size(n); i++) {
    yaml_node_t *key = node_at(p, n->data.mapping.pairs.start[i].key);
    if (key->type == YAML_SCALAR_NODE && strcmp(text_of(key), "f32") == 0)
      return fail_at(p, key, "tolerance", "no tolerance for f32: f32 shapes run only the naive kernels, "
                     "which are the reference itself (expected f16, bf16, e4m3, e5m2)");
  }
  if ((rc = check_keys(p, n, "tolerance", KEYS, 4)) != AT_OK) return rc;
  for (int i = 0; i < map_size(n); i++) {
    yaml_node_pair_t *pair = &n->data.mapping.pairs.start[i];
    const char *name = text_of(node_at(p, pair->key));
    at_dtype d = AT_DTYPE_BF16;
    at_dtype_parse(name, &d); /* cannot fail: the key is one of KEYS */
    join_key(sub, "tolerance", name);
    if ((rc = read_number(p, node_at(p, pair->value), sub, 0, 1, 1, &p->cfg->tolerance[d])) != AT_OK)
      return rc;
  }
  return AT_OK;
}

/* keep: a fraction (written with a point or exponent, in (0, 1]) or a count (an integer >= 1). */
static at_status parse_keep(const parser *p, const yaml_node_t *n)
{
  tn_config *c = p->cfg;
  at_status rc;
  if ((rc = expect_plain(p, n, "timing.keep", "a fraction or a count")) != AT_OK) return rc;
  if (strpbrk(text_of(n), ".eE")) {
    c->keep_count = 0;
    return read_number(p, n, "timing.keep", 0, 1, 1, &c->keep_fraction);
  }
  c->keep_fraction = 0;
  return read_int(p, n, "timing.keep", 1, INT_MAX, &c->keep_count);
}

static at_status parse_timing(const parser *p, const yaml_node_t *n)
{
  static const char *const KEYS[] = {"warmup", "reps", "first_pass_reps", "keep"};
  tn_config *c = p->cfg;
  at_status rc;
  yaml_node_t *v, *reps, *first;
  if ((rc = expect_mapping(p, n, "timing", "warmup, reps, first_pass_reps and keep")) != AT_OK) return rc;
  if ((rc = check_keys(p, n, "timing", KEYS, 4)) != AT_OK) return rc;
  if ((v = map_get(p, n, "warmup")) &&
      (rc = read_int(p, v, "timing.warmup", 0, 1000000, &c->warmup)) != AT_OK)
    return rc;
  if ((reps = map_get(p, n, "reps")) &&
      (rc = read_int(p, reps, "timing.reps", 1, 1000000, &c->reps)) != AT_OK)
    return rc;
  if ((first = map_get(p, n, "first_pass_reps")) &&
      (rc = read_int(p, first, "timing.first_pass_reps", 0, 1000000, &c->first_pass_reps)) != AT_OK)
    return rc;
  if ((v = map_get(p, n, "keep")) && (rc = parse_keep(p, v)) != AT_OK) return rc;
  /* A first pass as long as the full one saves nothing. */
  if (c->first_pass_reps >= c->reps)
    return fail_at(p, first ? first : reps, first ? "timing.first_pass_reps" : "timing.reps",
                   "first_pass_reps (%d) must be less than reps (%d); 0 turns the first pass off",
                   c->first_pass_reps, c->reps);
  return AT_OK;
}

/* ---- the document ------------------------------------------------------------------------ */

static const char *const TOP_KEYS[] = {"devices", "shapes", "search", "budget", "tolerance", "timing"};
enum { N_TOP_KEYS = sizeof TOP_KEYS / sizeof *TOP_KEYS };

static at_status parse_root(parser *p, const yaml_node_t *root)
{
  char keys[256];
  at_status rc;
  yaml_node_t *v;
  join_names(TOP_KEYS, N_TOP_KEYS, keys, sizeof keys);
  if (!root) return fail_at(p, NULL, "", "empty config (expected a mapping with %s)", keys);
  if (root->type != YAML_MAPPING_NODE)
    return fail_at(p, root, "", "expected a mapping with %s, got %s", keys, kind_of(root));
  if ((rc = check_keys(p, root, "", TOP_KEYS, N_TOP_KEYS)) != AT_OK) return rc;
  if ((v = map_get(p, root, "devices")) && (rc = parse_devices(p, v)) != AT_OK) return rc;
  if (!(v = map_get(p, root, "shapes"))) return fail_at(p, root, "", "missing 'shapes' (the shapes to tune)");
  if ((rc = parse_shapes(p, v)) != AT_OK) return rc;
  if ((v = map_get(p, root, "search")) && (rc = parse_search(p, v)) != AT_OK) return rc;
  if ((v = map_get(p, root, "budget")) && (rc = parse_budget(p, v)) != AT_OK) return rc;
  if ((v = map_get(p, root, "tolerance")) && (rc = parse_tolerance(p, v)) != AT_OK) return rc;
  if ((v = map_get(p, root, "timing")) && (rc = parse_timing(p, v)) != AT_OK) return rc;
  return AT_OK;
}

static at_status yaml_failure(const char *name, const yaml_parser_t *y)
{
  if (y->error == YAML_MEMORY_ERROR) return at_fail(AT_ERR_NOMEM, "%s: out of memory parsing YAML", name);
  if (y->error == YAML_READER_ERROR)
    return at_fail(AT_ERR_CONFIG, "%s: unreadable YAML at byte %zu: %s", name, y->problem_offset,
                   y->problem ? y->problem : "unknown problem");
  char context[256] = "";
  if (y->context)
    snprintf(context, sizeof context, " (%s at line %zu, column %zu)", y->context, y->context_mark.line + 1,
             y->context_mark.column + 1);
  return at_fail(AT_ERR_CONFIG, "%s:%zu:%zu: YAML syntax error: %s%s", name, y->problem_mark.line + 1,
                 y->problem_mark.column + 1, y->problem ? y->problem : "unknown problem", context);
}

/* A second document in the stream would be ignored silently; refuse it instead. */
static at_status check_single_document(const char *name, yaml_parser_t *y)
{
  yaml_document_t next;
  if (!yaml_parser_load(y, &next)) return yaml_failure(name, y);
  yaml_node_t *root = yaml_document_get_root_node(&next);
  at_status rc = AT_OK;
  if (root)
    rc = at_fail(AT_ERR_CONFIG, "%s:%zu:%zu: a second YAML document (a config is one document)", name,
                 root->start_mark.line + 1, root->start_mark.column + 1);
  yaml_document_delete(&next);
  return rc;
}

/* Lists and mappings may nest this deep; the deepest config nests 4 (shapes, an entry, a field,
 * a range). libyaml's scanner spends time proportional to the open levels on every token (100000
 * '[' took 23 s before the syntax error), so an event pass refuses a deeper document at its 33rd
 * level, having read little more than that, before the loader reads the whole stream. */
enum { MAX_NESTING = 32 };

static at_status check_nesting(const char *text, size_t len, const char *name)
{
  yaml_parser_t y;
  if (!yaml_parser_initialize(&y)) return at_fail(AT_ERR_NOMEM, "%s: cannot initialize the YAML parser", name);
  yaml_parser_set_input_string(&y, (const unsigned char *)text, len);
  at_status rc = AT_OK;
  int depth = 0, done = 0;
  while (!done) {
    yaml_event_t ev;
    /* A syntax error: the loader meets it at the same place and reports it. */
    if (!yaml_parser_parse(&y, &ev)) break;
    if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
      if (++depth > MAX_NESTING) {
        rc = at_fail(AT_ERR_CONFIG, "%s:%zu:%zu: lists and mappings nested deeper than %d levels", name,
                     ev.start_mark.line + 1, ev.start_mark.column + 1, MAX_NESTING);
        done = 1;
      }
    } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
      depth--;
    } else if (ev.type == YAML_STREAM_END_EVENT) {
      done = 1;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&y);
  return rc;
}

at_status tn_config_parse(const char *text, size_t len, const char *name, tn_config *out)
{
  if (!text || !out) return at_fail(AT_ERR_INVALID, "tn_config_parse: text or out is NULL");
  if (!name) name = "<config>";
  tn_config_init(out);
  snprintf(out->path, sizeof out->path, "%s", name);
  at_status rc = check_nesting(text, len, name);
  if (rc != AT_OK) return rc;
  yaml_parser_t y;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&y))
    return at_fail(AT_ERR_NOMEM, "%s: cannot initialize the YAML parser", name);
  yaml_parser_set_input_string(&y, (const unsigned char *)text, len);
  if (!yaml_parser_load(&y, &doc)) {
    rc = yaml_failure(name, &y);
    yaml_parser_delete(&y);
    return rc;
  }
  parser p = {.name = name, .doc = &doc, .cfg = out};
  rc = parse_root(&p, yaml_document_get_root_node(&doc));
  if (rc == AT_OK) rc = check_single_document(name, &y);
  free(p.slots);
  yaml_document_delete(&doc);
  yaml_parser_delete(&y);
  if (rc != AT_OK) tn_config_free(out);
  return rc;
}

/* The whole file in a NUL-terminated buffer. */
static at_status read_file(const char *path, char **text, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f) return at_fail(AT_ERR_IO, "cannot read config '%s': %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  at_status rc = buf ? AT_OK : at_fail(AT_ERR_NOMEM, "out of memory reading config '%s'", path);
  while (rc == AT_OK) {
    if (n + 1 == cap) {
      char *bigger = cap >= FILE_CAP ? NULL : realloc(buf, cap * 2);
      if (!bigger) {
        rc = at_fail(cap >= FILE_CAP ? AT_ERR_CONFIG : AT_ERR_NOMEM, "config '%s' is %s", path,
                     cap >= FILE_CAP ? "larger than 16 MiB" : "too large for memory");
        break;
      }
      buf = bigger, cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0 && ferror(f)) rc = at_fail(AT_ERR_IO, "cannot read config '%s': %s", path, strerror(errno));
    if (got == 0) break;
  }
  fclose(f);
  if (rc != AT_OK) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *text = buf, *len = n;
  return AT_OK;
}

at_status tn_config_load(const char *path, tn_config *out)
{
  if (!path || !out) return at_fail(AT_ERR_INVALID, "tn_config_load: path or out is NULL");
  tn_config_init(out);
  char *text = NULL;
  size_t len = 0;
  at_status rc = read_file(path, &text, &len);
  if (rc != AT_OK) return rc;
  rc = tn_config_parse(text, len, path, out);
  free(text);
  return rc;
}

int tn_config_first_serving(const tn_config *c)
{
  for (int i = 0; c && c->serving && i < c->n_shapes; i++)
    if (!at_serving_is_padded(&c->serving[i].layout)) return i;
  return -1;
}

at_status tn_config_refuse_serving(const tn_config *c)
{
  const int i = tn_config_first_serving(c);
  if (i < 0) return AT_OK;
  char key[256], what[96];
  const tn_serving_shape *v = &c->serving[i];
  at_serving_key(&c->shapes[i], &v->layout, v->layout.q_layout == AT_SEQ_RAGGED ? v->q_lens : NULL, v->kv_lens, key,
                 sizeof key);
  at_serving_layout_describe(&v->layout, what, sizeof what);
  return at_fail(AT_ERR_CONFIG,
                 "%s: shape %s%s%s%s has %s: ragged and paged shapes are not benchmarked from a config "
                 "('attntune tune' tunes them; 'attntune bench --lengths / --page-size' times one)",
                 c->path, key, c->groups[i][0] ? " (" : "", c->groups[i], c->groups[i][0] ? ")" : "", what);
}

/* ---- keys and shards --------------------------------------------------------------------- */

void tn_shape_key(const at_shape *s, char *buf, size_t size)
{
  at_shape_key(s, buf, size);
  size_t n = strlen(buf);
  if (s->scale != 0.0f && n + 1 < size) snprintf(buf + n, size - n, ".scale%.9g", (double)s->scale);
}

at_status tn_shard_parse(const char *text, int *index, int *count)
{
  const char *usage = "(expected i/n with 0 <= i < n, e.g. 0/4)";
  if (!text) return at_fail(AT_ERR_INVALID, "shard is NULL %s", usage);
  char *slash = NULL, *end = NULL;
  errno = 0;
  long i = strtol(text, &slash, 10);
  int ok = slash != text && *slash == '/' && (slash[1] >= '0' && slash[1] <= '9') && text[0] >= '0' &&
           text[0] <= '9';
  long n = ok ? strtol(slash + 1, &end, 10) : 0;
  if (!ok || *end != '\0' || errno == ERANGE)
    return at_fail(AT_ERR_INVALID, "invalid shard '%s' %s", text, usage);
  if (n < 1 || n > TN_SHARD_MAX)
    return at_fail(AT_ERR_INVALID, "invalid shard '%s': the count %ld must be from 1 to %d", text, n,
                   TN_SHARD_MAX);
  if (i >= n)
    return at_fail(AT_ERR_INVALID,
                   "invalid shard '%s': index %ld is not below the count %ld (shards are 0 to %ld)", text, i,
                   n, n - 1);
  *index = (int)i, *count = (int)n;
  return AT_OK;
}

typedef struct ranked {
  double flops;
  int index;
  char key[TN_SHAPE_KEY_CAP];
} ranked;

/* Largest first; the key makes the order total, so it never depends on the file's order. */
static int by_work(const void *a, const void *b)
{
  const ranked *x = a, *y = b;
  if (x->flops != y->flops) return x->flops > y->flops ? -1 : 1;
  int k = strcmp(x->key, y->key);
  return k ? k : (x->index > y->index) - (x->index < y->index);
}

at_status tn_work_order(const tn_config *c, int *order)
{
  if (!c || (!order && c->n_shapes)) return at_fail(AT_ERR_INVALID, "tn_work_order: config or order is NULL");
  if (c->n_shapes == 0) return AT_OK;
  ranked *r = malloc((size_t)c->n_shapes * sizeof *r);
  if (!r) return at_fail(AT_ERR_NOMEM, "out of memory ranking %d shapes", c->n_shapes);
  for (int i = 0; i < c->n_shapes; i++) {
    r[i].flops = at_shape_flops(&c->shapes[i]);
    r[i].index = i;
    tn_shape_key(&c->shapes[i], r[i].key, sizeof r[i].key);
  }
  qsort(r, (size_t)c->n_shapes, sizeof *r, by_work);
  for (int rank = 0; rank < c->n_shapes; rank++) order[rank] = r[rank].index;
  free(r);
  return AT_OK;
}

at_status tn_shard_owners(const tn_config *c, int count, int *owner)
{
  if (!c || (!owner && c->n_shapes))
    return at_fail(AT_ERR_INVALID, "tn_shard_owners: config or owner is NULL");
  if (count < 1 || count > TN_SHARD_MAX)
    return at_fail(AT_ERR_INVALID, "shard count %d out of range (expected 1..%d)", count, TN_SHARD_MAX);
  if (c->n_shapes == 0) return AT_OK;
  int *order = malloc((size_t)c->n_shapes * sizeof *order);
  if (!order) return at_fail(AT_ERR_NOMEM, "out of memory assigning %d shapes to shards", c->n_shapes);
  at_status rc = tn_work_order(c, order);
  for (int rank = 0; rc == AT_OK && rank < c->n_shapes; rank++) owner[order[rank]] = rank % count;
  free(order);
  return rc;
}

at_status tn_config_keep_shard(tn_config *c, int index, int count)
{
  if (!c) return at_fail(AT_ERR_INVALID, "tn_config_keep_shard: config is NULL");
  if (index < 0 || index >= count)
    return at_fail(AT_ERR_INVALID, "shard %d/%d: the index must be from 0 to %d", index, count, count - 1);
  if (c->n_shapes == 0) return AT_OK;
  int *owner = malloc((size_t)c->n_shapes * sizeof *owner);
  if (!owner) return at_fail(AT_ERR_NOMEM, "out of memory selecting shard %d/%d", index, count);
  at_status rc = tn_shard_owners(c, count, owner);
  int kept = 0;
  for (int i = 0; rc == AT_OK && i < c->n_shapes; i++) {
    if (owner[i] != index) {
      serving_shape_free(&c->serving[i]);
      continue;
    }
    tn_serving_shape moved = c->serving[i];
    if (kept != i) c->serving[i] = (tn_serving_shape){.layout = moved.layout}; /* one owner of the lengths */
    c->shapes[kept] = c->shapes[i];
    c->serving[kept] = moved;
    memmove(c->groups[kept], c->groups[i], sizeof c->groups[i]);
    kept++;
  }
  for (int i = kept; rc == AT_OK && i < c->n_shapes; i++) serving_shape_free(&c->serving[i]);
  if (rc == AT_OK) c->n_shapes = kept;
  free(owner);
  return rc;
}
