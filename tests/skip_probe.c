/* skip_probe.c — a cmocka program whose tests pass, skip or fail as argv[1] says, run through
 * tu_run_group: skip_test.sh checks the exit codes ctest relies on (77 only when every test
 * skipped). Modes: skip (two tests skip), mixed (one passes, one skips), fail (one skips, one
 * fails), setup-fails (the group setup fails). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "tests/testutil.h"

static const char *g_mode = "";

static void test_first(void **state)
{
  (void)state;
  if (strcmp(g_mode, "mixed") == 0) return; /* passes */
  skip();
}

static void test_second(void **state)
{
  (void)state;
  if (strcmp(g_mode, "fail") == 0) fail_msg("failing on purpose");
  skip();
}

static int group_setup(void **state)
{
  (void)state;
  return strcmp(g_mode, "setup-fails") == 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: skip_probe skip|mixed|fail|setup-fails|seed\n");
    return 2;
  }
  g_mode = argv[1];
  if (strcmp(g_mode, "seed") == 0) {
    tn_rng a = tu_rng(), b = tu_rng_for(7);
    printf("draws %.9f %.9f\n", tn_rng_uniform(&a, 0, 1), tn_rng_uniform(&b, 0, 1));
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first),
      cmocka_unit_test(test_second),
  };
  return TU_RUN_GROUP(tests, group_setup, NULL);
}
