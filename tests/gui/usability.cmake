# The main window as a newcomer uses it (issue 11). It measures event-loop stalls while 2000
# tokens stream: run it alone, like test_main_window.
tokenscope_add_qtest(test_window_usability ${CMAKE_CURRENT_SOURCE_DIR}/test_window_usability.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
target_compile_definitions(test_window_usability PRIVATE TOKENSCOPE_APP="$<TARGET_FILE:tokenscope>")
add_dependencies(test_window_usability tokenscope)
set_tests_properties(test_window_usability PROPERTIES TIMEOUT 900 RUN_SERIAL TRUE)
# View › Theme (issue 19): dark, light and the system's palette, judged from grabbed pixels.
tokenscope_add_qtest(test_themes ${CMAKE_CURRENT_SOURCE_DIR}/test_themes.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
# Edit › Settings… (issue 19): saved, offered for reload, applied by the reload.
tokenscope_add_qtest(test_settings ${CMAKE_CURRENT_SOURCE_DIR}/test_settings.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
