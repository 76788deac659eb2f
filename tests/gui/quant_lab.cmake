# The Quantization lab window (issue 17): a real run on a tiny model fills the table and the
# plot row by row and writes files that open as the current model; cancel leaves no file; the
# explanation's numbers against hand calculations; the Tools menu opens it on the loaded model.
tokenscope_add_qtest(test_quant_lab ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_lab.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
set_tests_properties(test_quant_lab PROPERTIES TIMEOUT 300)
