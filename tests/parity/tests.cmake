# PyTorch parity of the compiled training step: the MLP, CNN and transformer-block samples
# trained for 20 steps with each optimizer configuration by `dlcc run --entry train_step` and by
# a functional PyTorch mirror (tests/parity/parity.py) from the same initial params and batches;
# losses per step, grad norms, final params and optimizer slots agree to 1e-4 where the case is
# well-conditioned in float32 (and always on the first step), and elsewhere within 8x PyTorch's
# own float32 error (float32 vs float64, permuted batches): see the script's docstring.
# Needs /usr/bin/python3 with numpy and torch (Debian python3-torch, tools/setup.sh); without
# torch the script exits 77 and the test is reported as skipped.
#
# Every ISA level the x86 backend emits is checked on any machine that can run it: the host's
# own CPU (parity_torch), and the artifact compiled for x86-64-v3 (AVX2 tiles) and x86-64-v4
# (AVX-512 tiles), each skipped (77) where the host lacks the level's features, and x86-64-v3
# also on a host without AVX-512, whose own level is the AVX2 lowering already. The forced
# levels are left out of sanitizer builds (the same generated code; only the compiler differs),
# and there the host's level trains 5 steps, not 20, from artifacts compiled at LLVM -O1: the
# sanitizers check the C code every step runs, which the first steps already run, and dlcc's
# code runs the same at any LLVM level; the numbers and -O3's code are the gcc build's to check.
if(DL_SANITIZE)
  set(DL_PARITY_STEPS --steps 5 --opt 1)
endif()
add_test(NAME parity_torch COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/parity.py
                                   --dlcc $<TARGET_FILE:dlcc> ${DL_PARITY_STEPS})
set_tests_properties(parity_torch PROPERTIES LABELS slow TIMEOUT 600 SKIP_RETURN_CODE 77)
if(NOT DL_SANITIZE)
  foreach(level x86-64-v3 x86-64-v4)
    string(REPLACE "-" "_" tname "parity_torch_${level}")
    add_test(NAME ${tname} COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/parity.py
                                   --dlcc $<TARGET_FILE:dlcc> --cpu ${level})
    set_tests_properties(${tname} PROPERTIES LABELS slow TIMEOUT 600 SKIP_RETURN_CODE 77)
  endforeach()
endif()
