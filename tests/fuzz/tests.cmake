# tests/fuzz — libFuzzer targets.
#   fuzz_parse        the .dlg parser             seeds: tests/fuzz/corpus (dict: dlg.dict)
#   fuzz_onnx         the ONNX importer           seeds: tests/fuzz/corpus_onnx (dict: onnx.dict)
#   fuzz_npy          the .npy reader             seeds: tests/fuzz/corpus_npy
#   fuzz_safetensors  the safetensors reader      seeds: tests/fuzz/corpus_safetensors
# The fuzzers (libFuzzer + ASan + UBSan) are built only with -DDL_FUZZ=ON and clang:
#   CC=clang-19 cmake -S . -B build-fuzz -G Ninja -DDL_FUZZ=ON && ninja -C build-fuzz fuzz_onnx
#   cp -r tests/fuzz/corpus_onnx /tmp/c && ./build-fuzz/tests/fuzz_onnx -max_total_time=60 \
#       -rss_limit_mb=2048 -timeout=10 -dict=tests/fuzz/onnx.dict /tmp/c
# (run on a scratch copy of the corpus so it does not grow in the tree; add a crash input, once
# fixed, to the seed corpus as a regression case.)
# Each target also has a <name>_replay executable (a plain main over a directory of inputs) that
# is always built; ctest runs it over the target's seed corpus so every compiler checks the
# entry point on the seeds and on the regression inputs.
set(DL_FUZZ_TARGETS_LIBS
    "fuzz_parse\;dl_frontend"
    "fuzz_onnx\;dl_frontend\;dl_passes"
    "fuzz_npy\;dl_base"
    "fuzz_safetensors\;dl_base")

if(DL_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  foreach(entry ${DL_FUZZ_TARGETS_LIBS})
    list(GET entry 0 name)
    list(SUBLIST entry 1 -1 libs)
    add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.c)
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -g)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(${name} PRIVATE ${libs} dl_flags)
  endforeach()
  # The library code the fuzzers reach must be instrumented too.
  foreach(lib dl_frontend dl_ir dl_base dl_passes dl_onnx_pb)
    target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
  endforeach()
elseif(DL_FUZZ)
  message(WARNING "DL_FUZZ needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}); fuzzers not built")
endif()

add_executable(fuzz_parse_replay ${CMAKE_CURRENT_LIST_DIR}/fuzz_parse.c)
target_compile_definitions(fuzz_parse_replay PRIVATE DL_FUZZ_REPLAY_MAIN=1)
target_link_libraries(fuzz_parse_replay PRIVATE dl_frontend dl_flags)
add_test(NAME fuzz_parse_corpus
         COMMAND fuzz_parse_replay ${CMAKE_CURRENT_LIST_DIR}/corpus)
set_tests_properties(fuzz_parse_corpus PROPERTIES LABELS unit)

foreach(entry ${DL_FUZZ_TARGETS_LIBS})
  list(GET entry 0 name)
  if(name STREQUAL "fuzz_parse")
    continue()
  endif()
  list(SUBLIST entry 1 -1 libs)
  string(REPLACE "fuzz_" "" short ${name})
  add_executable(${name}_replay ${CMAKE_CURRENT_LIST_DIR}/${name}.c
                 ${CMAKE_CURRENT_LIST_DIR}/fuzz_replay.c)
  target_link_libraries(${name}_replay PRIVATE ${libs} dl_flags)
  add_test(NAME ${name}_corpus
           COMMAND ${name}_replay ${CMAKE_CURRENT_LIST_DIR}/corpus_${short})
  set_tests_properties(${name}_corpus PROPERTIES LABELS unit)
endforeach()
