# Chat view, token inspector, sampling panel, distribution chart, conversation list.
target_sources(tokenscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/message_document.h ${CMAKE_CURRENT_LIST_DIR}/message_document.cpp
  ${CMAKE_CURRENT_LIST_DIR}/think_section.h ${CMAKE_CURRENT_LIST_DIR}/think_section.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_view.h ${CMAKE_CURRENT_LIST_DIR}/chat_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_view_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_view_copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/markdown_highlighter.h ${CMAKE_CURRENT_LIST_DIR}/markdown_highlighter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chat_attention_overlay.h ${CMAKE_CURRENT_LIST_DIR}/chat_attention_overlay.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_text_map.h ${CMAKE_CURRENT_LIST_DIR}/attention_text_map.cpp
  ${CMAKE_CURRENT_LIST_DIR}/token_inspector.h ${CMAKE_CURRENT_LIST_DIR}/token_inspector.cpp
  ${CMAKE_CURRENT_LIST_DIR}/distribution_chart.h ${CMAKE_CURRENT_LIST_DIR}/distribution_chart.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sampling_panel.h ${CMAKE_CURRENT_LIST_DIR}/sampling_panel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/speculation_controls.h ${CMAKE_CURRENT_LIST_DIR}/speculation_controls.cpp
  ${CMAKE_CURRENT_LIST_DIR}/speculation_explainer.h ${CMAKE_CURRENT_LIST_DIR}/speculation_explainer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conversation_list.h ${CMAKE_CURRENT_LIST_DIR}/conversation_list.cpp)
