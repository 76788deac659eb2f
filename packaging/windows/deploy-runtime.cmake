# Install-time step on Windows (cmake/TokenscopePackaging.cmake runs it for the "runtime"
# component, so it runs for `cmake --install` and inside every cpack run): copies into the
# installed bin\ what the executables need that Windows does not have.
#   1. Qt: windeployqt on the installed tokenscope.exe (Qt DLLs, the platform, style, image and
#      SQL driver plugins).
#   2. Every other DLL the executables load (fmt, spdlog, sentencepiece, ... from vcpkg), found
#      with file(GET_RUNTIME_DEPENDENCIES) in TOKENSCOPE_DLL_DIRS; Windows' own DLLs and Qt's
#      (step 1) are left out. The MSVC runtime comes from InstallRequiredSystemLibraries.
# Inputs, set by an install(CODE) just before: TOKENSCOPE_DEPLOY_BINDIR,
# TOKENSCOPE_DEPLOY_EXECUTABLES, TOKENSCOPE_DEPLOY_QT_EXECUTABLE, TOKENSCOPE_WINDEPLOYQT,
# TOKENSCOPE_DLL_DIRS.

if(TOKENSCOPE_DEPLOY_QT_EXECUTABLE)
  if(NOT TOKENSCOPE_WINDEPLOYQT)
    message(FATAL_ERROR "tokenscope: windeployqt was not found at configure time; cannot collect the Qt DLLs")
  endif()
  message(STATUS "tokenscope: windeployqt ${TOKENSCOPE_DEPLOY_BINDIR}/${TOKENSCOPE_DEPLOY_QT_EXECUTABLE}")
  execute_process(
    COMMAND "${TOKENSCOPE_WINDEPLOYQT}"
            --release
            --no-translations
            --no-compiler-runtime
            --no-opengl-sw
            --no-system-d3d-compiler
            --dir "${TOKENSCOPE_DEPLOY_BINDIR}"
            "${TOKENSCOPE_DEPLOY_BINDIR}/${TOKENSCOPE_DEPLOY_QT_EXECUTABLE}"
    RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "tokenscope: windeployqt failed (${result})")
  endif()
endif()

set(executables "")
foreach(name IN LISTS TOKENSCOPE_DEPLOY_EXECUTABLES)
  if(name)
    list(APPEND executables "${TOKENSCOPE_DEPLOY_BINDIR}/${name}")
  endif()
endforeach()

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${executables}
  DIRECTORIES ${TOKENSCOPE_DLL_DIRS}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  PRE_EXCLUDE_REGEXES "^api-ms-" "^ext-ms-" "^[Qq]t6"
  POST_EXCLUDE_REGEXES "[/\\\\][Ww][Ii][Nn][Dd][Oo][Ww][Ss][/\\\\]" "[/\\\\][Ss]ystem32[/\\\\]")
foreach(dll IN LISTS resolved)
  get_filename_component(dll_name "${dll}" NAME)
  if(NOT EXISTS "${TOKENSCOPE_DEPLOY_BINDIR}/${dll_name}")
    message(STATUS "tokenscope: bundling ${dll}")
    file(COPY "${dll}" DESTINATION "${TOKENSCOPE_DEPLOY_BINDIR}")
  endif()
endforeach()
if(unresolved)
  message(WARNING "tokenscope: DLLs not found in ${TOKENSCOPE_DLL_DIRS}: ${unresolved}")
endif()
