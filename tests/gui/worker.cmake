tokenscope_add_qtest(test_inference_worker ${CMAKE_CURRENT_SOURCE_DIR}/test_inference_worker.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
