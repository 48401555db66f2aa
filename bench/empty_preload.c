/* empty_preload.c - a shared object that does nothing: the floor of preloading any library. */
int sw_bench_empty_preload;
