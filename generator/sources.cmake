set(AT_GENERATOR_SOURCES
  generator/text.c
  generator/variant.c
  generator/families.c
  generator/fa2.c
  generator/fa3.c
  generator/emit.c
)
