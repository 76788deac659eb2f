# Tools › Batch demo (issue 18): the timeline view paints what its data says (cell colours at
# cell positions, the budget line), and the window runs a second engine on a tiny model and
# shows every scheduled step, chunked prefill and preemption included.
tokenscope_add_qtest(test_batch_demo ${CMAKE_CURRENT_SOURCE_DIR}/test_batch_demo.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
set_tests_properties(test_batch_demo PROPERTIES TIMEOUT 300)
