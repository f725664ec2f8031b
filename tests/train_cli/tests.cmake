# `dlcc run --entry train_step` and `dlcc train` (tools/dlcc.c). Shell scripts with /usr/bin/python3
# + numpy; each sets DLCC_CACHE_DIR to a temporary directory of its own.
# Arguments, model and data errors, the data pipeline and the --dry-run plan: no training runtime.
add_test(NAME train_cli_args
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_args.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_args PROPERTIES LABELS unit)
# `dlcc run --entry train_step --steps 3` on the MLP sample, checkpoints read back by Python.
add_test(NAME train_cli_steps
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_steps.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_steps PROPERTIES LABELS unit)
# `dlcc train` on Fashion-MNIST (2048 training samples, the 10000 test images).
add_test(NAME train_cli_fmnist
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_fmnist.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_fmnist PROPERTIES LABELS slow TIMEOUT 120)
# samples/train_fmnist.c, the C trainer sample: errors, one epoch on 2048 samples, determinism.
add_test(NAME sample_train_fmnist_c
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_sample_c.sh $<TARGET_FILE:train_fmnist>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(sample_train_fmnist_c PROPERTIES LABELS slow TIMEOUT 120)
# Divergence is never silent: a warning at the first non-finite step, exit 4 after
# --max-skipped-steps in a row (no checkpoint), --detect-anomaly's FILE:LINE:COL of the first
# non-finite node, non-finite data refused, readable losses; the exit statuses in --help, README
# and docs/status.md agree.
add_test(NAME train_cli_diverge
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_diverge.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_diverge PROPERTIES LABELS unit TIMEOUT 120)
# Long runs: the metrics log (JSON Lines, CSV), --save-every, --resume (bit-identical to a run
# never stopped), Ctrl-C / SIGTERM (exit 130 / 143, checkpoint, resume command), refusals.
add_test(NAME train_cli_watch
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_watch.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_watch PROPERTIES LABELS unit TIMEOUT 300)
# `dlcc plot`: the SVG parses as XML with one polyline point per logged step; errors name the
# file and line. train_cli_plot_render: a screenshot in headless Chromium draws the curves where
# the SVG puts them (tools/setup.sh --test installs chromium-headless-shell; skipped (77)
# without a Chromium).
add_test(NAME train_cli_plot
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_plot.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_plot PROPERTIES LABELS unit TIMEOUT 120)
add_test(NAME train_cli_plot_render
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_plot_render.sh $<TARGET_FILE:dlcc>
                 ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_plot_render PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
# --lr-schedule one-cycle against torch's OneCycleLR; skipped (77) without torch.
add_test(NAME train_cli_onecycle
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_onecycle.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_onecycle PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
# `dlcc train --data NAME=FILE`: a masked regression against NumPy's SGD, --normalize stored in
# the checkpoint and reapplied, a classifier by name, bad inputs named.
add_test(NAME train_cli_data
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_data.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_data PROPERTIES LABELS unit TIMEOUT 120)
# --map FILE: a PyTorch-named checkpoint through rename rules (dlcc run --params on both backends
# and train_step, dlcc train --init), against NumPy; bad map files at FILE:LINE:COL.
add_test(NAME train_cli_map
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_map.sh $<TARGET_FILE:dlcc> ${CMAKE_SOURCE_DIR})
set_tests_properties(train_cli_map PROPERTIES LABELS unit TIMEOUT 120)
