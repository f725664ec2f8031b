# Not in sanitizer builds: python3 cannot dlopen an ASan-instrumented libdlrt.so (the sanitizer
# runtime must be the first library of the process); the gcc stage of tools/test.sh runs them.
if(DL_SANITIZE)
  return()
endif()
# The Python binding python/dlcc/ (tests/python/test_binding.py, run by /usr/bin/python3 with
# numpy). The script compiles into a temporary cache of its own; the binding finds this build's
# libdlcc, libdlrt and dlcc through DLCC_LIBRARY / DLRT_LIBRARY / DLCC_EXE.
set(DL_PY_ENV "DLCC_BUILD_DIR=${CMAKE_BINARY_DIR}" "DLCC_EXE=$<TARGET_FILE:dlcc>"
              "DLRT_LIBRARY=$<TARGET_FILE:dlrt>" "DLCC_LIBRARY=$<TARGET_FILE:dlcc_shared>")
# Compile + infer against `dlcc run`, train steps, params / hparams, checkpoints, errors,
# zero-copy input binding, dlcc.Loader (determinism, shuffle, pad, normalise, limit / n_classes,
# release) and training fed from a loader.
add_test(NAME python_binding COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_binding.py)
set_tests_properties(python_binding PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "${DL_PY_ENV}")
# The binding never lies or crashes: inputs never given, output views after close(), integers
# range-checked before ctypes, dlcc.Error (ArgumentError / ArgumentTypeError) for every misuse,
# corrupt checkpoints, closed sessions / models / loaders (tests/python/test_robustness.py).
add_test(NAME python_robustness COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_robustness.py)
set_tests_properties(python_robustness PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "${DL_PY_ENV}")
# samples/train_fmnist.py for 1 epoch on 2048 Fashion-MNIST samples (2000 test images), fed by
# two dlcc.Loader (train: 2 producers, test: padded last batch).
add_test(NAME python_train_fmnist
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_binding.py --sample)
set_tests_properties(python_train_fmnist PROPERTIES LABELS slow TIMEOUT 120
                                                    ENVIRONMENT "${DL_PY_ENV}")
