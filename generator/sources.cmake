set(AT_GENERATOR_SOURCES
  generator/variant.c
  generator/fa2.c
  generator/fa3.c
  generator/emit.c
  generator/compile.c
)
