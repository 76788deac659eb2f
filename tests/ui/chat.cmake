# Chat view, sampling panel + distribution chart, conversation list + token inspector.
tokenscope_add_qtest(test_chat_view ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_view.cpp LIBS tokenscope::ui LABELS ui)
# Reasoning of thinking models: the splitter alone, and folded in the chat view.
tokenscope_add_qtest(test_think_section ${CMAKE_CURRENT_SOURCE_DIR}/test_think_section.cpp LIBS tokenscope::ui LABELS ui)
tokenscope_add_qtest(test_chat_thinking ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_thinking.cpp LIBS tokenscope::ui LABELS ui)
tokenscope_add_qtest(test_sampling_panel ${CMAKE_CURRENT_SOURCE_DIR}/test_sampling_panel.cpp LIBS tokenscope::ui LABELS ui)
tokenscope_add_qtest(test_conversation_list ${CMAKE_CURRENT_SOURCE_DIR}/test_conversation_list.cpp LIBS tokenscope::ui LABELS ui)
# It measures the event loop's longest stall while tokens stream: alone on the machine, so a
# CPU-heavy neighbour (the fuzzer, the bench test) cannot make the measurement meaningless.
set_tests_properties(test_chat_view PROPERTIES RUN_SERIAL TRUE)
# The chat's attention overlay: positions to message text, and drawing a hovered token's row.
tokenscope_add_qtest(test_chat_attention ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_attention.cpp LIBS tokenscope::ui LABELS ui)
# Markdown styled in place in the chat (issue 19).
tokenscope_add_qtest(test_markdown ${CMAKE_CURRENT_SOURCE_DIR}/test_markdown.cpp LIBS tokenscope::ui LABELS ui)
