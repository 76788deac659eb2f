# Warnings for our own targets only (third-party headers come in as SYSTEM includes).
function(tokenscope_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow=local>)
  elseif(MSVC)
    # /utf-8: sources are read as UTF-8 (they have no BOM) and narrow literals such as
    # "\u00d7" become UTF-8 bytes, as with GCC; without it MSVC uses the system's code page for
    # both. Qt adds it to the targets that link Qt, not to the engine and the CLI. C++ only,
    # like the GCC flags: nvcc does not take MSVC's options for the plugin's .cu files.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:/W4 /permissive- /utf-8>)
  endif()
endfunction()
