# Step mode: the worker produces exactly one token per stepOnce (QSignalSpy), the steps carry
# the prefill block and decode rows, the stepped reply equals a streamed one; the window's Step
# button and F10 take one token per press.
tokenscope_add_qtest(test_step_mode ${CMAKE_CURRENT_SOURCE_DIR}/test_step_mode.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
set_tests_properties(test_step_mode PROPERTIES TIMEOUT 300)
