#pragma once
// cudaStream_t without cuda_runtime.h, so that C++ code can include the op headers.
struct CUstream_st;
using cudaStream_t = CUstream_st*;
