tokenscope_add_qtest(test_main_window ${CMAKE_CURRENT_SOURCE_DIR}/test_main_window.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
target_compile_definitions(test_main_window PRIVATE TOKENSCOPE_APP="$<TARGET_FILE:tokenscope>")
add_dependencies(test_main_window tokenscope)
set_tests_properties(test_main_window PROPERTIES TIMEOUT 600)
# Measures event-loop stalls during a real generation: run it alone (see tests/ui/chat.cmake).
set_tests_properties(test_main_window PROPERTIES RUN_SERIAL TRUE)
