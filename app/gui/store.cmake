# ConversationStore: conversations and messages in SQLite (Qt SQL, WAL).
target_sources(tokenscope_app PRIVATE ${CMAKE_CURRENT_LIST_DIR}/conversation_store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_writer.h ${CMAKE_CURRENT_LIST_DIR}/trace_writer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wal_syncer.h ${CMAKE_CURRENT_LIST_DIR}/wal_syncer.cpp
  # File › Export / Import conversations (Markdown, JSON with token traces).
  ${CMAKE_CURRENT_LIST_DIR}/conversation_export.h ${CMAKE_CURRENT_LIST_DIR}/conversation_export.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_export.cpp)
