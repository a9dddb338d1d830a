# Library part of the tuner (reference, verification, timing) and the CLI entry points.
set(AT_TUNER_LIB_SOURCES
  tuner/reference.c
  tuner/cli.c
  tuner/config.c
  tuner/harness.c
  tuner/worker.c
  tuner/bench_serving.c  # its batch buffers and checks are the worker's too
  tuner/pool.c
  tuner/tune.c
  tuner/report.c
  tuner/measure.c
)
set(AT_TUNER_CLI_SOURCES
  tuner/main.c
  tuner/cmd_devices.c
  tuner/cmd_bench.c
  tuner/cmd_tune.c
  tuner/cmd_cache.c
  tuner/cmd_gen.c
  tuner/cmd_report.c
)
