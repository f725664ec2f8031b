# PyTorch parity of the compiled training step: the MLP, CNN and transformer-block samples
# trained for 20 steps with each optimizer configuration by `dlcc run --entry train_step` and by
# a functional PyTorch mirror (tests/parity/parity.py) from the same initial params and batches;
# losses per step, grad norms, final params and optimizer slots agree to a relative error of
# 1e-4. Needs /usr/bin/python3 with numpy and torch (Debian python3-torch, tools/setup.sh);
# without torch the script exits 77 and the test is reported as skipped.
add_test(NAME parity_torch COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/parity.py
                                   --dlcc $<TARGET_FILE:dlcc>)
set_tests_properties(parity_torch PROPERTIES LABELS slow TIMEOUT 480 SKIP_RETURN_CODE 77)
