# Allocation-failure injection (SQLite's faultsim; STYLE.md 3.4): tests/fault/test_faultsim.c
# fails the (n+1)-th allocation for every n up to the count of each phase, on each sample:
#   front   — parse, dims, shapes, verify (every point)
#   compile — autodiff, codegen, LLVM, link, cache store (every point; LLVM's own allocations
#             are not counted, so a failure ends before LLVM optimises and each point is cheap)
#   runtime — load, session, inputs, infer, train_step, checkpoint (every point)
# Every run must end in a clean error or success: never a crash, abort or (in the ASan build,
# LeakSanitizer) a leak, and never a partial checkpoint or a cache entry that breaks the next
# compile.
add_executable(test_faultsim ${CMAKE_CURRENT_LIST_DIR}/test_faultsim.c)
target_link_libraries(test_faultsim PRIVATE dl_flags dlcc_lib dlrt)
foreach(entry mlp_fmnist:N=4 cnn_fmnist:N=2 transformer_block:B=2)
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 stem)
  list(GET parts 1 bind)
  set(file ${stem}.dlg)
  set(dargs -D ${bind})
  add_test(NAME faultsim_front_${stem}
           COMMAND test_faultsim front ${CMAKE_SOURCE_DIR}/samples/${file} ${dargs})
  add_test(NAME faultsim_runtime_${stem}
           COMMAND test_faultsim runtime ${CMAKE_SOURCE_DIR}/samples/${file} ${dargs})
  add_test(NAME faultsim_compile_${stem}
           COMMAND test_faultsim compile ${CMAKE_SOURCE_DIR}/samples/${file} ${dargs})
  set_tests_properties(faultsim_front_${stem} faultsim_runtime_${stem} faultsim_compile_${stem}
                       PROPERTIES LABELS fault TIMEOUT 600)
endforeach()
