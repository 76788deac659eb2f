# Tools-menu windows: the Quantization lab (issue 17, on the engine's quant/) and the Batch
# demo (issue 18, on runtime/batch_demo).
target_sources(tokenscope_app PRIVATE ${CMAKE_CURRENT_LIST_DIR}/quant_lab_job.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quant_lab_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quant_lab_window.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_quant.cpp
  # Tools › Batch demo… (issue 18): the scheduler timeline.
  ${CMAKE_CURRENT_LIST_DIR}/batch_demo_window.cpp
  ${CMAKE_CURRENT_LIST_DIR}/main_window_batch.cpp)
# The built-in evaluation / calibration sample (split in halves by the window).
qt_add_resources(tokenscope_app "quant_lab_text"
  PREFIX "/text"
  BASE ${PROJECT_SOURCE_DIR}/resources/text
  FILES ${PROJECT_SOURCE_DIR}/resources/text/perplexity_english.txt)
# Tools › Server timeline: GET /tokenscope/v1/schedule polled off the GUI thread.
if(TARGET tokenscope_remote)
  target_sources(tokenscope_app PRIVATE ${CMAKE_CURRENT_LIST_DIR}/server_timeline_model.cpp
    ${CMAKE_CURRENT_LIST_DIR}/server_timeline_window.cpp)
endif()
