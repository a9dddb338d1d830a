# Library part of the tuner (reference, verification, timing) and the CLI entry points.
set(AT_TUNER_LIB_SOURCES
  tuner/reference.c
  tuner/cli.c
  tuner/timing.c
  tuner/config.c
  tuner/harness.c
  tuner/worker.c
  tuner/tune.c
)
set(AT_TUNER_CLI_SOURCES
  tuner/main.c
  tuner/cmd_devices.c
  tuner/cmd_bench.c
  tuner/cmd_tune.c
  tuner/cmd_cache.c
  tuner/cmd_gen.c
)
