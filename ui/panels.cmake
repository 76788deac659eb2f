# Inspection panels: attention heatmap (+ off-thread renderer), KV cache, metrics (+ sparkline),
# memory budget and model info.
target_sources(tokenscope_ui PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/heatmap_renderer.h
  ${CMAKE_CURRENT_LIST_DIR}/heatmap_renderer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_heatmap.h
  ${CMAKE_CURRENT_LIST_DIR}/attention_heatmap.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache_view.h
  ${CMAKE_CURRENT_LIST_DIR}/kv_cache_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sparkline.h
  ${CMAKE_CURRENT_LIST_DIR}/sparkline.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metrics_view.h
  ${CMAKE_CURRENT_LIST_DIR}/metrics_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_budget_view.h
  ${CMAKE_CURRENT_LIST_DIR}/memory_budget_view.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model_info_view.h
  ${CMAKE_CURRENT_LIST_DIR}/model_info_view.cpp)
