# Tools › Server timeline (issue 18): the schedule pages accumulated, and the window polling the
# app's own in-process server while two clients' requests run together.
if(TARGET tokenscope_server AND TARGET tokenscope_remote AND TARGET PkgConfig::HTTPLIB)
  tokenscope_add_qtest(test_server_timeline ${CMAKE_CURRENT_SOURCE_DIR}/test_server_timeline.cpp
    LIBS tokenscope_app tokenscope_reference PkgConfig::HTTPLIB LABELS "gui;server")
  set_tests_properties(test_server_timeline PROPERTIES TIMEOUT 180)
endif()
