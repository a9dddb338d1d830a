set(AT_CORE_SOURCES
  core/error.c
  core/shape.c
  core/arch.c
  core/numerics.c
  core/serving.c
)
