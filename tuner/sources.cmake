# Library part of the tuner (reference, verification, timing) and the CLI entry points.
set(AT_TUNER_LIB_SOURCES
  tuner/reference.c
  tuner/cli.c
  tuner/timing.c
)
set(AT_TUNER_CLI_SOURCES
  tuner/main.c
  tuner/cmd_devices.c
)
