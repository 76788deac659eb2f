# ConversationStore suite. The SIGKILL test needs a second process that writes and gets killed:
# store_writer, whose path reaches the suite through a compile definition.
add_executable(tokenscope_store_writer ${CMAKE_CURRENT_LIST_DIR}/store_writer_main.cpp)
target_link_libraries(tokenscope_store_writer PRIVATE tokenscope_app)
tokenscope_warnings(tokenscope_store_writer)

tokenscope_add_qtest(test_conversation_store ${CMAKE_CURRENT_LIST_DIR}/test_conversation_store.cpp
  LIBS tokenscope_app LABELS gui)
target_compile_definitions(test_conversation_store PRIVATE
  TOKENSCOPE_STORE_WRITER="$<TARGET_FILE:tokenscope_store_writer>")
add_dependencies(test_conversation_store tokenscope_store_writer)
# Conversations exported as Markdown and JSON and imported back (issue 19).
tokenscope_add_qtest(test_conversation_export ${CMAKE_CURRENT_LIST_DIR}/test_conversation_export.cpp
  LIBS tokenscope_app tokenscope_reference LABELS gui)
