# Teaching views: step mode's pipeline, the head grid (small multiples), the layer x head
# overview, and the export helpers (PNG, SVG, CSV, JSON) behind their context menus.
target_sources(tokenscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/teaching_data.h
  ${CMAKE_CURRENT_LIST_DIR}/teaching_data.cpp
  ${CMAKE_CURRENT_LIST_DIR}/export_actions.h
  ${CMAKE_CURRENT_LIST_DIR}/export_actions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/head_grid.h
  ${CMAKE_CURRENT_LIST_DIR}/head_grid.cpp
  ${CMAKE_CURRENT_LIST_DIR}/head_overview.h
  ${CMAKE_CURRENT_LIST_DIR}/head_overview.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_view.h
  ${CMAKE_CURRENT_LIST_DIR}/step_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_timeline_view.h
  ${CMAKE_CURRENT_LIST_DIR}/batch_timeline_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_timeline_export.cpp)
