# Inspection panel suites (offscreen). Each also saves PNGs to /tmp/tokenscope-panels/.
foreach(suite attention_heatmap kv_cache_view metrics_view memory_budget_view model_info_view)
  tokenscope_add_qtest(test_${suite} ${CMAKE_CURRENT_SOURCE_DIR}/test_${suite}.cpp
    LIBS tokenscope::ui LABELS ui)
endforeach()
