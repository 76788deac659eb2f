# Help menu dialogs.
target_sources(tokenscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/shortcuts_dialog.h ${CMAKE_CURRENT_LIST_DIR}/shortcuts_dialog.cpp)
