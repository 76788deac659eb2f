# Teaching mode: step mode and the head views (worker commands and the window's docks).
target_sources(tokenscope_app PRIVATE ${CMAKE_CURRENT_LIST_DIR}/inference_worker_teaching.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_teaching.cpp)
