# tests/fuzz — the parser fuzz target.
# fuzz_parse (libFuzzer + ASan + UBSan) is built only with -DDL_FUZZ=ON and clang:
#   CC=clang-19 cmake -S . -B build-fuzz -G Ninja -DDL_FUZZ=ON && ninja -C build-fuzz fuzz_parse
#   ./build-fuzz/tests/fuzz_parse -max_total_time=60 -dict=tests/fuzz/dlg.dict tests/fuzz/corpus
# (copy the corpus to a scratch directory first if you do not want it to grow in the tree)
# fuzz_parse_replay (a plain main over a directory of inputs) is always built, and ctest runs
# it over the seed corpus so every compiler checks the entry point on the seeds.
if(DL_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_parse ${CMAKE_CURRENT_LIST_DIR}/fuzz_parse.c)
  target_compile_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address,undefined -g)
  target_link_options(fuzz_parse PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_parse PRIVATE dl_frontend dl_flags)
  # The library code the fuzzer reaches must be instrumented too.
  foreach(lib dl_frontend dl_ir dl_base)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  endforeach()
elseif(DL_FUZZ)
  message(WARNING "DL_FUZZ needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}); fuzz_parse not built")
endif()

add_executable(fuzz_parse_replay ${CMAKE_CURRENT_LIST_DIR}/fuzz_parse.c)
target_compile_definitions(fuzz_parse_replay PRIVATE DL_FUZZ_REPLAY_MAIN=1)
target_link_libraries(fuzz_parse_replay PRIVATE dl_frontend dl_flags)
add_test(NAME fuzz_parse_corpus
         COMMAND fuzz_parse_replay ${CMAKE_CURRENT_LIST_DIR}/corpus)
set_tests_properties(fuzz_parse_corpus PROPERTIES LABELS unit)
