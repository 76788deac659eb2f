# Every dependency comes through find_package / pkg-config; tools/setup-deps installs them.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
# sentencepiece through pkg-config; without it (Windows: packaging/windows/build-installer.ps1
# builds sentencepiece from source) its header and library are looked up on CMAKE_PREFIX_PATH
# and given the same target name.
find_package(PkgConfig)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(SENTENCEPIECE IMPORTED_TARGET sentencepiece)
endif()
if(NOT TARGET PkgConfig::SENTENCEPIECE)
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(SENTENCEPIECE_LIBRARY NAMES sentencepiece)
  if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY)
    message(FATAL_ERROR "sentencepiece not found: neither the pkg-config module 'sentencepiece' "
                        "nor sentencepiece_processor.h and the library on CMAKE_PREFIX_PATH")
  endif()
  add_library(PkgConfig::SENTENCEPIECE INTERFACE IMPORTED)
  target_include_directories(PkgConfig::SENTENCEPIECE INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(PkgConfig::SENTENCEPIECE INTERFACE ${SENTENCEPIECE_LIBRARY})
  get_filename_component(SENTENCEPIECE_LIBRARY_DIRS ${SENTENCEPIECE_LIBRARY} DIRECTORY)
endif()
# PCRE2 (8-bit, with JIT and Unicode properties) runs the byte-level BPE pre-tokenizers
# expressions (engine/tokenizer/pretokenizer.cpp; docs/architecture.md says why PCRE2).
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PCRE2 IMPORTED_TARGET libpcre2-8)
endif()
if(NOT TARGET PkgConfig::PCRE2)
  find_path(PCRE2_INCLUDE_DIR pcre2.h)
  find_library(PCRE2_LIBRARY NAMES pcre2-8 pcre2-8-static)
  if(NOT PCRE2_INCLUDE_DIR OR NOT PCRE2_LIBRARY)
    message(FATAL_ERROR "PCRE2 not found: neither the pkg-config module 'libpcre2-8' nor pcre2.h "
                        "and the pcre2-8 library on CMAKE_PREFIX_PATH (Debian: libpcre2-dev)")
  endif()
  add_library(PkgConfig::PCRE2 INTERFACE IMPORTED)
  target_include_directories(PkgConfig::PCRE2 INTERFACE ${PCRE2_INCLUDE_DIR})
  target_link_libraries(PkgConfig::PCRE2 INTERFACE ${PCRE2_LIBRARY})
endif()
# The trainer library is used by tests only (a tokenizer trained at test time).
find_library(SENTENCEPIECE_TRAIN_LIBRARY NAMES sentencepiece_train HINTS ${SENTENCEPIECE_LIBRARY_DIRS})

set(TOKENSCOPE_HAVE_QT_TEST OFF)
if(TOKENSCOPE_GUI)
  find_package(Qt6 REQUIRED COMPONENTS Core Widgets Sql Network HttpServer Concurrent Test)
  set(TOKENSCOPE_HAVE_QT_TEST ON)
elseif(TOKENSCOPE_TESTS)
  find_package(Qt6 QUIET COMPONENTS Core Test)
  if(Qt6Test_FOUND)
    set(TOKENSCOPE_HAVE_QT_TEST ON)
  endif()
endif()

# CUDA: AUTO turns it on when a toolkit with nvcc is present (CI has nvcc but no GPU).
set(TOKENSCOPE_CUDA_ENABLED OFF)
if(NOT TOKENSCOPE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    enable_language(CUDA)
    # CMake 3.25 predates nvcc 13 and does not know its C++20 flag; the kernels include engine
    # headers that need C++20 (std::span), so tell CMake how to ask for it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(TOKENSCOPE_CUDA_ENABLED ON)
  elseif(TOKENSCOPE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TOKENSCOPE_CUDA=ON but no CUDA toolkit (nvcc + cudart + cublas) was found")
  else()
    message(STATUS "tokenscope: no CUDA toolkit found, building the CPU backend only")
  endif()
endif()

# The OpenAI-compatible server (app/server, `tokenscope-cli serve`): cpp-httplib for HTTP/1.1
# with chunked streaming and nlohmann-json for the request and response bodies (docs/
# architecture.md says why). Debian ships cpp-httplib as a compiled library with a pkg-config
# file (no CMake package); its Cflags carry the OpenSSL/zlib/brotli switches the library was
# built with, which must match for the class layouts to agree. Without either, the CLI builds
# without `serve`.
set(TOKENSCOPE_SERVER OFF)
find_package(nlohmann_json 3.10 QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
endif()
if(TARGET PkgConfig::HTTPLIB AND nlohmann_json_FOUND)
  set(TOKENSCOPE_SERVER ON)
else()
  message(STATUS "tokenscope: cpp-httplib (pkg-config cpp-httplib) or nlohmann_json not found, "
                 "tokenscope-cli is built without `serve` (Debian: libcpp-httplib-dev nlohmann-json3-dev)")
endif()
