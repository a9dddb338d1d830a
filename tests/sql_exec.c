/* sql_exec.c — `sql_exec FILE SQL`: runs SQL on a cache file, for shell tests that need a cache
 * in a state no attntune command makes (tune_gpu_test.sh rewrites the library versions its rows
 * were measured with). Exit 0 on success, 1 with SQLite's message otherwise. */
#include <stdio.h>

#include <sqlite3.h>

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: sql_exec FILE SQL\n");
    return 2;
  }
  sqlite3 *db = NULL;
  char *err = NULL;
  int rc = sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, argv[2], NULL, NULL, &err);
  if (rc != SQLITE_OK) fprintf(stderr, "sql_exec %s: %s\n", argv[1], err ? err : sqlite3_errmsg(db));
  sqlite3_free(err);
  if (sqlite3_close(db) != SQLITE_OK && rc == SQLITE_OK) rc = SQLITE_ERROR;
  return rc == SQLITE_OK ? 0 : 1;
}
