# The cpu backend against the reference evaluator: every op, several shapes and attributes.
# Each op family has its own tests/codegen/test_<family>.c; all link into one executable.
file(GLOB DL_CG_TEST_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.c)
add_executable(test_codegen ${DL_CG_TEST_SRC} ${CMAKE_CURRENT_LIST_DIR}/cg_check.c
                            ${CMAKE_CURRENT_LIST_DIR}/ptxas_run.c)
target_link_libraries(test_codegen PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_codegen PRIVATE ${CMAKE_CURRENT_LIST_DIR})
add_test(NAME codegen_ops COMMAND test_codegen)
set_tests_properties(codegen_ops PROPERTIES LABELS numeric)

# The same cases with every kernel run as 3 uneven chunks, last first: any partition of a
# kernel's range must give the same bytes (the contract the threaded executor relies on). Not in
# sanitizer builds: the compiler's code is the same as codegen_ops's there (and the runtime's
# split path by train_step_split), and it took 200 s of their CI time.
if(NOT DL_SANITIZE)
  add_test(NAME codegen_ops_split COMMAND test_codegen)
  set_tests_properties(codegen_ops_split PROPERTIES LABELS numeric ENVIRONMENT DLRT_DEBUG_SPLIT=3)
endif()
# Once per ISA level the backend emits (the convention is in tests/codegen/cg_check.h):
# codegen_ops above is the host's own level; v3 forces the AVX2 code (256-bit vectors, the 6x16
# GEMM tiles) and v4 the AVX-512 code (512-bit vectors, the 12x32 tiles). A level the host cannot
# run exits 77 (skipped, saying which features are missing); codegen_ops_v4_compile still
# compiles every case for AVX-512 and checks the artifact on any machine. v3 also exits 77 on a
# host without AVX-512, whose native level (codegen_ops) already is the AVX2 lowering.
# The forced levels that run code are left out of sanitizer builds (the generated code is the
# same; the sanitizers watch the compiler, which codegen_ops_v4_compile drives down the
# AVX-512 lowering paths there too).
if(NOT DL_SANITIZE)
  add_test(NAME codegen_ops_v3 COMMAND test_codegen)
  set_tests_properties(codegen_ops_v3 PROPERTIES LABELS numeric SKIP_RETURN_CODE 77
                       ENVIRONMENT DLCC_TEST_CPU=x86-64-v3)
  add_test(NAME codegen_ops_v4 COMMAND test_codegen)
  set_tests_properties(codegen_ops_v4 PROPERTIES LABELS numeric SKIP_RETURN_CODE 77
                       ENVIRONMENT DLCC_TEST_CPU=x86-64-v4)
endif()
add_test(NAME codegen_ops_v4_compile COMMAND test_codegen)
set_tests_properties(codegen_ops_v4_compile PROPERTIES LABELS numeric
                     ENVIRONMENT "DLCC_TEST_CPU=x86-64-v4;DLCC_TEST_COMPILE_ONLY=1")
# The bfloat16 product cases (names with "bf16") once per bf16 level: vdpbf16ps (AVX512-BF16)
# and AMX tiles, each run where the host has it (else skipped, 77) and compiled and checked on
# every machine.
foreach(level bf16 amx)
  if(NOT DL_SANITIZE)
    add_test(NAME codegen_bf16_${level} COMMAND test_codegen bf16)
    set_tests_properties(codegen_bf16_${level} PROPERTIES LABELS numeric SKIP_RETURN_CODE 77
                         ENVIRONMENT DLCC_TEST_CPU=x86-64-v4-${level})
  endif()
  add_test(NAME codegen_bf16_${level}_compile COMMAND test_codegen bf16)
  set_tests_properties(
    codegen_bf16_${level}_compile PROPERTIES LABELS numeric
    ENVIRONMENT "DLCC_TEST_CPU=x86-64-v4-${level};DLCC_TEST_COMPILE_ONLY=1")
endforeach()
# The target seam: elementwise kernels lowered through codegen/nvptx/ by the shared lowering,
# emitted as PTX for sm_80 and assembled by ptxas (no GPU needed; exits 77 without ptxas).
add_executable(test_nvptx_ptxas ${CMAKE_CURRENT_LIST_DIR}/nvptx_ptxas.c
                               ${CMAKE_CURRENT_LIST_DIR}/ptxas_run.c)
target_link_libraries(test_nvptx_ptxas PRIVATE dl_flags dl_test_harness dlcc_lib)
add_test(NAME codegen_nvptx_ptxas COMMAND test_nvptx_ptxas)
set_tests_properties(codegen_nvptx_ptxas PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
# Sanitizer builds compile the x86 cases at LLVM -O1 (DLCC_TEST_OPT, tests/codegen/cg_check.h).
if(DL_SANITIZE)
  set_property(TEST codegen_ops codegen_ops_v4_compile codegen_bf16_bf16_compile
               codegen_bf16_amx_compile APPEND PROPERTY ENVIRONMENT DLCC_TEST_OPT=1)
endif()
# Every case above emitted as PTX by the NVPTX target and assembled by ptxas for an Ampere GPU,
# with no error and no warning (compile only: no GPU needed; exits 77 without the CUDA toolkit).
# The summary line counts the modules and kernels ptxas accepted. For a Hopper GPU too, the
# families whose instructions depend on the GPU's generation (16-bit floats and their
# conversions, integers, reductions, NaN handling, data movement, elementwise gradients): the
# lowering is the same for every sm_XX (codegen/nvptx/ names the GPU only to LLVM), and the whole
# suite a second time took 116 s of CI's. Sanitizer builds run sm_80 only.
add_test(NAME codegen_ops_sm80 COMMAND test_codegen)
set_tests_properties(codegen_ops_sm80 PROPERTIES LABELS numeric SKIP_RETURN_CODE 77
                     ENVIRONMENT DLCC_TEST_CPU=cuda:sm_80)
if(NOT DL_SANITIZE)
  add_test(NAME codegen_ops_sm90 COMMAND test_codegen half bf16 lowp cast integer int_ reduce nan
                                                  shape grad_unary)
  set_tests_properties(codegen_ops_sm90 PROPERTIES LABELS numeric SKIP_RETURN_CODE 77
                       ENVIRONMENT DLCC_TEST_CPU=cuda:sm_90)
endif()
# Every sample (infer and the whole train step) compiled by the driver for cuda:sm_80 and
# cuda:sm_90: the artifact loads, its PTX image is assembled by ptxas, a session is refused
# cleanly without a GPU (exits 77 without the CUDA toolkit).
file(GLOB DL_SAMPLE_MODELS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/samples/*.dlg)
add_executable(test_nvptx_samples ${CMAKE_CURRENT_LIST_DIR}/nvptx_samples.c
                                  ${CMAKE_CURRENT_LIST_DIR}/ptxas_run.c)
target_link_libraries(test_nvptx_samples PRIVATE dl_flags dl_test_harness dlcc_lib dlrt)
target_include_directories(test_nvptx_samples PRIVATE ${CMAKE_SOURCE_DIR}/runtime)
add_test(NAME codegen_nvptx_samples COMMAND test_nvptx_samples ${DL_SAMPLE_MODELS})
set_tests_properties(codegen_nvptx_samples PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
