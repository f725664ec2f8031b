# The data loader of libdlrt (runtime/rt_loader.c, dlrt.h "Data loader"): determinism across
# producer counts, shuffle, drop/pad, normalisation, crop/flip, IDX (Fashion-MNIST t10k when
# installed) and .npy sources, callback source, errors and misuse.
add_executable(test_loader ${CMAKE_CURRENT_LIST_DIR}/test_loader.c)
target_link_libraries(test_loader PRIVATE dl_flags dl_test_harness dl_base dlrt m)
add_test(NAME loader_unit COMMAND test_loader)
set_tests_properties(loader_unit PROPERTIES LABELS unit TIMEOUT 60)

# The pipeline benchmark (bench/loader.sh runs the full 0.5 s / 0.1 s scenario); the test runs
# a scaled-down scenario (50 ms producer, 10 ms step, 20 batches) as a smoke test.
add_executable(loader_bench ${CMAKE_SOURCE_DIR}/bench/loader_bench.c)
target_link_libraries(loader_bench PRIVATE dl_flags dlrt)
add_test(NAME loader_bench_smoke COMMAND loader_bench 0.05 0.01 20 16)
set_tests_properties(loader_bench_smoke PROPERTIES LABELS slow TIMEOUT 60)
