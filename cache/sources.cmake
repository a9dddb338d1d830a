set(AT_CACHE_SOURCES
  cache/cache.c
)
