/* cmd_report.c — `attntune report`: the cache's results as text, md, csv, json or html. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tuner/cli.h"
#include "tuner/commands.h"
#include "tuner/report.h"

static const char USAGE[] =
    "usage: attntune report [--db FILE] [--gpu MODEL] [--format text|md|csv|json|html] [--out FILE]\n"
    "\n"
    "Per shape: the best implementation with its time and TFLOP/s (and for decode shapes, T <= 16,\n"
    "TB/s of K/V read), the fastest verified attntune kernel ('tuned'), cuDNN's time or why it has\n"
    "none, the naive time, the speedups over cuDNN and the verification errors; per (dtype, head\n"
    "dim, mask) the geometric-mean speedup of tuned over cuDNN; for an FP8 KV cache (cuDNN has no\n"
    "such graph) the tokens per second over the same shape with 16-bit K/V, best over best, where\n"
    "the cache holds both (csv/json: kv8_base_ms, kv8_tokens_per_s_gain). html is one self-contained file\n"
    "with SVG charts; with decode shapes in the cache it adds their K/V bandwidth against the KV\n"
    "length, with the HBM copy rate as the ceiling.\n"
    "\n"
    "  --db FILE        the cache (default attntune.db)\n"
    "  --gpu MODEL      only this GPU model (as 'attntune devices' names it); default: every model\n"
    "  --format NAME    text (default), md, csv, json or html\n"
    "  --out FILE       write there instead of standard output\n";

typedef struct report_args {
  const char *db, *gpu, *out;
  tn_report_format format;
} report_args;

/* 0: go on; 1: --help printed; -1: usage error printed. */
static int parse(int argc, char **argv, report_args *a)
{
  enum { O_DB = 256, O_GPU, O_FORMAT, O_OUT, O_HELP };
  static const struct option options[] = {
      {"db", required_argument, NULL, O_DB},   {"gpu", required_argument, NULL, O_GPU},
      {"format", required_argument, NULL, O_FORMAT}, {"out", required_argument, NULL, O_OUT},
      {"help", no_argument, NULL, O_HELP},     {NULL, 0, NULL, 0}};
  int c;
  memset(a, 0, sizeof *a);
  a->db = "attntune.db";
  a->format = TN_REPORT_TEXT;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    switch (c) {
    case O_DB: a->db = optarg; break;
    case O_GPU: a->gpu = optarg; break;
    case O_OUT: a->out = optarg; break;
    case O_FORMAT:
      if (tn_report_format_parse(optarg, &a->format) != AT_OK)
        return tn_usage_error("report", "unknown format '%s' (expected text, md, csv, json, html)", optarg), -1;
      break;
    case 'h':
    case O_HELP: fputs(USAGE, stdout); return 1;
    default:
      if (optopt) return tn_usage_error("report", "option '%s' needs a value", argv[optind - 1]), -1;
      return tn_usage_error("report", "unknown option '%s'", argv[optind - 1]), -1;
    }
  }
  if (optind < argc) return tn_usage_error("report", "unexpected argument '%s'", argv[optind]), -1;
  if (!tn_check_db_path("report", a->db)) return -1;
  return 0;
}

/* Write to --out (created only once the report is known to have rows) or standard output. */
static int render(const tn_report *r, const report_args *a)
{
  FILE *out = stdout;
  if (a->out && !(out = fopen(a->out, "w"))) {
    fprintf(stderr, "attntune report: cannot write '%s': %s\n", a->out, strerror(errno));
    return TN_EXIT_RUNTIME;
  }
  at_status rc = tn_report_write(r, a->format, out, a->out ? a->out : "standard output");
  if (out != stdout && fclose(out) != 0 && rc == AT_OK) {
    fprintf(stderr, "attntune report: closing '%s' failed: %s\n", a->out, strerror(errno));
    return TN_EXIT_RUNTIME;
  }
  return rc == AT_OK ? TN_EXIT_OK : tn_fail_exit("report", rc);
}

int tn_cmd_report(int argc, char **argv)
{
  report_args a;
  int parsed = parse(argc, argv, &a);
  if (parsed) return parsed > 0 ? TN_EXIT_OK : TN_EXIT_USAGE;
  tn_report r;
  at_status rc = tn_report_load(a.db, a.gpu, &r);
  if (rc != AT_OK) return tn_fail_exit("report", rc);
  int code;
  if (r.n_rows == 0) {
    char why[2048];
    tn_report_explain_empty(&r, why, sizeof why);
    fprintf(stderr, "attntune report: %s\n", why);
    code = TN_EXIT_RUNTIME;
  } else {
    code = render(&r, &a);
  }
  tn_report_free(&r);
  return code;
}
