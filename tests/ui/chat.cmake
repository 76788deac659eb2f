# Chat view, sampling panel + distribution chart, conversation list + token inspector.
tokenscope_add_qtest(test_chat_view ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_view.cpp LIBS tokenscope::ui LABELS ui)
tokenscope_add_qtest(test_sampling_panel ${CMAKE_CURRENT_SOURCE_DIR}/test_sampling_panel.cpp LIBS tokenscope::ui LABELS ui)
tokenscope_add_qtest(test_conversation_list ${CMAKE_CURRENT_SOURCE_DIR}/test_conversation_list.cpp LIBS tokenscope::ui LABELS ui)
