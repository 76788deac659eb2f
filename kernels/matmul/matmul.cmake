# Matrix products on weights in their GGUF formats (fused GEMV for decode, dequantize + cuBLAS
# for prefill) and their self-test. Included from kernels/CMakeLists.txt.
target_sources(tokenscope_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_vec.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_gate_up.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_qkv.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8_q8_0.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8_q4_k.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_dequant.cu
  ${CMAKE_CURRENT_LIST_DIR}/../selftest/matmul_selftest.cpp)
# -Wall -Wextra for the host side of our .cu files (nvcc forwards them to the host compiler).
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_vec.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_gate_up.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_qkv.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8_q8_0.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_gemv_int8_q4_k.cu
  ${CMAKE_CURRENT_LIST_DIR}/matmul_dequant.cu
  PROPERTIES COMPILE_OPTIONS "-Xcompiler=-Wall,-Wextra")
