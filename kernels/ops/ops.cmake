# CUDA ops (kernels/ops) and their CPU-vs-CUDA self-test (kernels/selftest).
# Included from kernels/CMakeLists.txt after tokenscope_kernels is defined.
target_sources(tokenscope_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/rms_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/activation.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/kv_append.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_split.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_gqa.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_combine.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_gemm.cu
  ${CMAKE_CURRENT_LIST_DIR}/../selftest/ops_selftest.cpp)
# -Wall for the host side of our .cu files (nvcc forwards it to the host compiler).
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cu
  ${CMAKE_CURRENT_LIST_DIR}/rms_norm.cu
  ${CMAKE_CURRENT_LIST_DIR}/rope.cu
  ${CMAKE_CURRENT_LIST_DIR}/activation.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cu
  ${CMAKE_CURRENT_LIST_DIR}/kv_append.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_split.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_gqa.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_combine.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention_gemm.cu
  PROPERTIES COMPILE_OPTIONS "-Xcompiler=-Wall")
