target_sources(tokenscope_app PRIVATE ${CMAKE_CURRENT_LIST_DIR}/main_window.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_speculation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_remote.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_serve.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_theme.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_settings.cpp
  ${CMAKE_CURRENT_LIST_DIR}/settings_dialog.cpp
  ${CMAKE_CURRENT_LIST_DIR}/theme.cpp)

add_executable(tokenscope ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
target_link_libraries(tokenscope PRIVATE tokenscope_app)
tokenscope_warnings(tokenscope)
install(TARGETS tokenscope RUNTIME DESTINATION bin)
