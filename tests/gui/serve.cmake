# File › Serve this model…: the app's in-process OpenAI server, checked over loopback HTTP.
if(TARGET tokenscope_server AND TARGET PkgConfig::HTTPLIB)
  tokenscope_add_qtest(test_model_server ${CMAKE_CURRENT_SOURCE_DIR}/test_model_server.cpp
    LIBS tokenscope_app tokenscope_reference PkgConfig::HTTPLIB LABELS "gui;server")
  set_tests_properties(test_model_server PROPERTIES TIMEOUT 180)
endif()
