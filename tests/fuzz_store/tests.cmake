# tests/fuzz_store — the cache store opening a hostile database (tests/fuzz_store/fuzz_store.c).
# fuzz_store (libFuzzer + ASan + UBSan) is built only with -DDL_FUZZ=ON and clang:
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DDL_FUZZ=ON \
#         -DDL_SANITIZE='address;undefined' && ninja -C build-fuzz fuzz_store
#   mkdir -p /tmp/cs && cp tests/fuzz/corpus_store/* /tmp/cs
#   TMPDIR=/dev/shm ./build-fuzz/tests/fuzz_store -max_total_time=600 -timeout=10 /tmp/cs
# (each input is written to a fresh directory under $TMPDIR: on tmpfs SQLite's fsyncs cost
# nothing, about 6x the executions per second of a disk)
# fuzz_store_replay (a plain main over a directory of inputs) is always built, and ctest runs it
# over the seed corpus tests/fuzz/corpus_store (small databases written by the store itself:
# `fuzz_store_replay --make-seeds DIR` writes them again; crash reproducers found later are
# kept there too).
if(DL_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_store ${CMAKE_CURRENT_LIST_DIR}/fuzz_store.c)
  target_compile_options(fuzz_store PRIVATE -fsanitize=fuzzer,address,undefined -g)
  target_link_options(fuzz_store PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_store PRIVATE dl_cache dl_base dl_flags)
  # The library code the fuzzer reaches must be instrumented too (dl_base is already in
  # tests/fuzz/tests.cmake's set; the option repeated is harmless).
  foreach(lib dl_cache dl_base)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  endforeach()
elseif(DL_FUZZ)
  message(WARNING "DL_FUZZ needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}); fuzz_store not built")
endif()

add_executable(fuzz_store_replay ${CMAKE_CURRENT_LIST_DIR}/fuzz_store.c)
target_compile_definitions(fuzz_store_replay PRIVATE DL_FUZZ_REPLAY_MAIN=1)
target_link_libraries(fuzz_store_replay PRIVATE dl_cache dl_base dl_flags)
add_test(NAME fuzz_store_corpus
         COMMAND fuzz_store_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus_store)
set_tests_properties(fuzz_store_corpus PROPERTIES LABELS unit TIMEOUT 120)
