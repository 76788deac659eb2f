# The worker's and the window's remote mode against the OpenAI server in-process (loopback).
if(TARGET tokenscope_remote AND TARGET tokenscope_server)
  tokenscope_add_qtest(test_remote_worker ${CMAKE_CURRENT_SOURCE_DIR}/test_remote_worker.cpp
    LIBS tokenscope_app tokenscope_server tokenscope_reference LABELS "gui;remote")
  set_tests_properties(test_remote_worker PROPERTIES TIMEOUT 120)
endif()
