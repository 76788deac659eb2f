# Teaching views offscreen: the head grid (panels, click to enlarge), the layer x head
# overview, step mode's pipeline view (back/forward, layer change), and exports (PNG size,
# SVG well-formed, CSV/JSON numbers).
tokenscope_add_qtest(test_teaching_views ${CMAKE_CURRENT_SOURCE_DIR}/test_teaching_views.cpp
  LIBS tokenscope::ui LABELS ui)
