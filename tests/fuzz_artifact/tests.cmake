# tests/fuzz_artifact — the plan validator fuzz target (runtime/rt_model.c's rt__model_from_plan,
# the function every load path runs on an artifact's plan; nothing is dlopen'ed).
# fuzz_artifact (libFuzzer + ASan + UBSan) is built only with -DDL_FUZZ=ON and clang:
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-19 -DDL_FUZZ=ON \
#         -DDL_SANITIZE='address;undefined' && ninja -C build-fuzz fuzz_artifact
#   mkdir -p /tmp/plans && ./build-fuzz/tests/fuzz_artifact -max_total_time=600 /tmp/plans \
#         tests/fuzz_artifact/corpus
# fuzz_artifact_replay (a plain main over files or directories) is always built; ctest runs it
# over the seed corpus (real plans named valid-*, which must be accepted, and the fuzzer's
# findings, which must be refused or accepted without breaking a guarantee).
# The corpus plans are compiled for a baseline CPU (--cpu x86-64) so every machine accepts them;
# tests/fuzz_artifact/make_corpus.sh rewrites them after a plan format change (keep the old
# format's seeds, renamed format<N>-*, when the version changes: they must be refused).
set(_fa_src ${CMAKE_CURRENT_LIST_DIR}/fuzz_artifact.c ${CMAKE_SOURCE_DIR}/runtime/rt_model.c)
if(DL_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_artifact ${_fa_src})
  target_include_directories(fuzz_artifact PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
  target_compile_options(fuzz_artifact PRIVATE -fsanitize=fuzzer,address,undefined -g)
  target_link_options(fuzz_artifact PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_artifact PRIVATE dl_base dl_flags ${CMAKE_DL_LIBS})
  target_compile_options(dl_base PRIVATE -fsanitize=fuzzer-no-link)
elseif(DL_FUZZ)
  message(WARNING "DL_FUZZ needs clang (CMAKE_C_COMPILER_ID is ${CMAKE_C_COMPILER_ID}); fuzz_artifact not built")
endif()

add_executable(fuzz_artifact_replay ${_fa_src})
target_include_directories(fuzz_artifact_replay PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
target_compile_definitions(fuzz_artifact_replay PRIVATE DL_FUZZ_REPLAY_MAIN=1)
target_link_libraries(fuzz_artifact_replay PRIVATE dl_base dl_flags ${CMAKE_DL_LIBS})
add_test(NAME fuzz_artifact_corpus
         COMMAND fuzz_artifact_replay ${CMAKE_CURRENT_LIST_DIR}/corpus)
set_tests_properties(fuzz_artifact_corpus PROPERTIES LABELS unit)
