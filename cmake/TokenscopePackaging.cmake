# Install layout and CPack configuration. Included by the top CMakeLists.txt after every target
# it installs (and before tests/, which checks the metadata configured here). Packages carry the one version number of project(tokenscope VERSION ...).
#
#   Linux:   tools/package -> build/release/packages/
#              tokenscope_<version>_amd64.deb           component "runtime"
#              tokenscope-cuda_<version>_amd64.deb      component "cuda" (only when built with CUDA)
#              tokenscope-<version>-Linux-x86_64.tar.gz  everything, relocatable
#   Windows: packaging/windows/build-installer.ps1 -> tokenscope-<version>-win64.exe (NSIS)
#
# Components: "runtime" (both executables, desktop entry, icons, AppStream metainfo, docs; on
# Windows also the Qt and compiler DLLs) and "cuda" (the CUDA backend plugin, which the
# executables load at run time from <exe dir>/../lib/tokenscope/ or from beside themselves).
# See packaging/README.md.

include(GNUInstallDirs)

set(TOKENSCOPE_APP_ID "io.github.tokenscope.tokenscope")
set(TOKENSCOPE_PACKAGE_CONTACT "tokenscope maintainers <maintainers@tokenscope.invalid>" CACHE STRING
    "Maintainer named in the packages")

# --- Install rules --------------------------------------------------------------------------
# The executables install themselves (app/cli/CMakeLists.txt, app/gui/window.cmake) into bin/;
# CMAKE_INSTALL_DEFAULT_COMPONENT_NAME (top CMakeLists.txt) puts them in "runtime".

# The CUDA plugin: exactly lib/tokenscope under the prefix (not the multiarch libdir), the place
# the loader looks at relative to the executable, in the .deb (/usr/lib/tokenscope) and in the
# .tar.gz alike.
if(TARGET tokenscope_cuda)
  install(TARGETS tokenscope_cuda
          LIBRARY DESTINATION lib/tokenscope COMPONENT cuda
          RUNTIME DESTINATION lib/tokenscope COMPONENT cuda)
endif()

if(UNIX AND NOT APPLE AND TARGET tokenscope)
  include(TokenscopeLinuxBundle)  # Qt and friends inside the .tar.gz (component bundle)
  # Desktop integration: the .desktop entry and the AppStream metainfo are named by the app id;
  # the icon is "tokenscope" in the hicolor theme (SVG plus the committed PNG renders).
  string(TIMESTAMP TOKENSCOPE_RELEASE_DATE "%Y-%m-%d" UTC)  # honours SOURCE_DATE_EPOCH
  configure_file(${PROJECT_SOURCE_DIR}/resources/linux/${TOKENSCOPE_APP_ID}.metainfo.xml.in
                 ${PROJECT_BINARY_DIR}/packaging/${TOKENSCOPE_APP_ID}.metainfo.xml @ONLY)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/linux/${TOKENSCOPE_APP_ID}.desktop
          DESTINATION ${CMAKE_INSTALL_DATADIR}/applications COMPONENT runtime)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/${TOKENSCOPE_APP_ID}.metainfo.xml
          DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo COMPONENT runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/tokenscope.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps COMPONENT runtime)
  foreach(size 48 128 256)
    install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/tokenscope-${size}.png
            DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/${size}x${size}/apps
            RENAME tokenscope.png COMPONENT runtime)
  endforeach()
endif()

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

if(WIN32)
  # Windows has no system package manager to bring the DLLs, so the install tree carries them:
  # the MSVC runtime, the DLLs of fmt/spdlog/sentencepiece (vcpkg), and Qt (windeployqt).
  set(CMAKE_INSTALL_SYSTEM_RUNTIME_DESTINATION ${CMAKE_INSTALL_BINDIR})
  set(CMAKE_INSTALL_SYSTEM_RUNTIME_COMPONENT runtime)
  include(InstallRequiredSystemLibraries)

  set(TOKENSCOPE_WINDEPLOYQT "")
  if(TARGET Qt6::windeployqt)
    get_target_property(TOKENSCOPE_WINDEPLOYQT Qt6::windeployqt IMPORTED_LOCATION)
  endif()
  if(NOT TOKENSCOPE_WINDEPLOYQT AND TARGET Qt6::qmake)
    get_target_property(_tokenscope_qmake Qt6::qmake IMPORTED_LOCATION)
    get_filename_component(_tokenscope_qt_bin "${_tokenscope_qmake}" DIRECTORY)
    find_program(TOKENSCOPE_WINDEPLOYQT_PROGRAM windeployqt HINTS "${_tokenscope_qt_bin}" NO_DEFAULT_PATH)
    set(TOKENSCOPE_WINDEPLOYQT "${TOKENSCOPE_WINDEPLOYQT_PROGRAM}")
  endif()
  if(TARGET tokenscope AND NOT TOKENSCOPE_WINDEPLOYQT)
    message(WARNING "windeployqt not found next to Qt's qmake: an install or installer would lack the Qt DLLs")
  endif()

  # Where the non-Qt DLLs live: bin/ beside every prefix (vcpkg's installed/<triplet>/bin).
  set(_tokenscope_dll_dirs "")
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH)
    file(TO_CMAKE_PATH "${prefix}" prefix)  # C:\Qt\... would be escapes in the install(CODE)
    list(APPEND _tokenscope_dll_dirs "${prefix}/bin")
  endforeach()
  if(DEFINED VCPKG_INSTALLED_DIR AND DEFINED VCPKG_TARGET_TRIPLET)
    list(APPEND _tokenscope_dll_dirs "${VCPKG_INSTALLED_DIR}/${VCPKG_TARGET_TRIPLET}/bin")
  endif()

  # Runs at install time (cmake --install and every cpack run), on the installed executables.
  set(_tokenscope_gui_exe "")
  if(TARGET tokenscope)
    set(_tokenscope_gui_exe "$<TARGET_FILE_NAME:tokenscope>")
  endif()
  install(CODE "
    set(TOKENSCOPE_DEPLOY_BINDIR \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    set(TOKENSCOPE_DEPLOY_EXECUTABLES \"$<TARGET_FILE_NAME:tokenscope-cli>;${_tokenscope_gui_exe}\")
    set(TOKENSCOPE_DEPLOY_QT_EXECUTABLE \"${_tokenscope_gui_exe}\")
    set(TOKENSCOPE_WINDEPLOYQT \"${TOKENSCOPE_WINDEPLOYQT}\")
    set(TOKENSCOPE_DLL_DIRS \"${_tokenscope_dll_dirs}\")
    " COMPONENT runtime)
  install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/windows/deploy-runtime.cmake COMPONENT runtime)

  # The plugin loads with LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | DEFAULT_DIRS, which does not search
  # PATH: cuBLAS must sit beside it. The cuBLAS DLLs are redistributable under NVIDIA's CUDA EULA.
  if(TARGET tokenscope_cuda AND DEFINED CUDAToolkit_BIN_DIR)
    file(GLOB _tokenscope_cublas_dlls
         "${CUDAToolkit_BIN_DIR}/cublas64_*.dll" "${CUDAToolkit_BIN_DIR}/cublasLt64_*.dll"
         "${CUDAToolkit_BIN_DIR}/x64/cublas64_*.dll" "${CUDAToolkit_BIN_DIR}/x64/cublasLt64_*.dll")
    if(_tokenscope_cublas_dlls)
      install(FILES ${_tokenscope_cublas_dlls} DESTINATION lib/tokenscope COMPONENT cuda)
    else()
      message(WARNING "cuBLAS DLLs not found under ${CUDAToolkit_BIN_DIR}; the cuda component would not load")
    endif()
  endif()
endif()

# --- CPack: common ----------------------------------------------------------------------------
set(CPACK_VERBATIM_VARIABLES ON)  # NSIS strings below keep their backslashes and quotes
set(CPACK_PACKAGE_NAME tokenscope)
set(CPACK_PACKAGE_VENDOR tokenscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "tokenscope runs a large language model (GGUF: Llama, Mistral, Gemma 3) on your computer and
shows what happens inside it while it answers: every token with its probability and the
alternatives it beat, attention heatmaps per layer and head, the KV cache filling block by
block, prefill and decode speed, and the memory budget. Includes tokenscope-cli for
inspecting models, benchmarks and perplexity.")
set(CPACK_PACKAGE_CONTACT "${TOKENSCOPE_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_INSTALL_DIRECTORY tokenscope)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/" "/build/" "/build-[^/]*/" "/\\.deps/")

set(CPACK_COMPONENTS_ALL runtime)
set(TOKENSCOPE_CUDA_COMPONENT_TITLE "CUDA backend (NVIDIA GPUs)")  # NSIS finds the section by it
if(TARGET tokenscope_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()
if(TOKENSCOPE_HAVE_LINUX_BUNDLE)
  # The .tar.gz only: packaging/linux/cpack-per-generator.cmake drops it for the .deb.
  list(APPEND CPACK_COMPONENTS_ALL bundle)
  set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/packaging/linux/cpack-per-generator.cmake)
endif()

if(WIN32)
  set(CPACK_GENERATOR NSIS)
  set(CPACK_PACKAGE_FILE_NAME "tokenscope-${PROJECT_VERSION}-win64")
else()
  set(CPACK_GENERATOR DEB TGZ)
  set(CPACK_PACKAGE_FILE_NAME "tokenscope-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")
endif()

# --- DEB: one package per component -----------------------------------------------------------
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)   # Depends from the ELF files (dpkg-shlibdeps, dpkg-dev)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME tokenscope)
# Appended to what dpkg-shlibdeps finds: Qt loads its SQLite driver as a plugin at run time
# (the conversation store), which no ELF NEEDED entry shows.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libqt6sql6-sqlite")
# CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY on the first line of every package's Description.
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME tokenscope-cuda)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION science)
# No dpkg-shlibdeps for the plugin: it links cuBLAS (libcublas.so.13, libcublasLt.so.13), which
# on the build machine comes from NVIDIA's tarball, not from a dpkg package, so dpkg-shlibdeps
# has no package to name for it (CPack passes --ignore-missing-info, which would silently drop
# cuBLAS from Depends). The dependencies are declared by hand instead: NVIDIA's apt package for
# cuBLAS of the toolkit major version the plugin was built against, and the exact tokenscope
# package, which also brings libc6/libstdc++6/libgcc-s1 that the plugin needs. The CUDA runtime
# is linked statically; the driver (libcuda.so.1) has no single package name across
# distributions and is checked at run time (`tokenscope-cli devices`).
if(TARGET tokenscope_cuda)
  set(_tokenscope_cuda_major 13)
  if(DEFINED CUDAToolkit_VERSION_MAJOR)
    set(_tokenscope_cuda_major ${CUDAToolkit_VERSION_MAJOR})
  endif()
  set(TOKENSCOPE_CUBLAS_DEB "libcublas-${_tokenscope_cuda_major}-0" CACHE STRING
      "NVIDIA apt package providing the cuBLAS the CUDA plugin links (Depends of tokenscope-cuda)")
endif()
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "tokenscope (= ${PROJECT_VERSION}), ${TOKENSCOPE_CUBLAS_DEB}")
set(CPACK_DEBIAN_CUDA_DESCRIPTION "The CUDA backend of tokenscope for NVIDIA GPUs (Ampere, Ada, Hopper and newer through PTX):
a plugin that tokenscope and tokenscope-cli load at run time from /usr/lib/tokenscope.
Needs the NVIDIA driver. Select it with --device cuda or --device auto.")

# --- TGZ: one relocatable archive with every component ----------------------------------------
# The executables find the plugin relative to themselves; everything else comes from the
# system libraries the .deb lists in Depends (Qt 6, spdlog, fmt, sentencepiece).
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)

# --- NSIS (Windows) ---------------------------------------------------------------------------
# TOKENSCOPE_NSIS_CHECK is for developers on Linux: with it, `cpack -G NSIS` (Debian's nsis
# package provides makensis) compiles the installer script from the Linux install tree. The
# .exe it makes is useless; what it checks is that makensis accepts these settings.
option(TOKENSCOPE_NSIS_CHECK "Configure the NSIS installer on a non-Windows host (script check only)" OFF)
mark_as_advanced(TOKENSCOPE_NSIS_CHECK)
if(WIN32 OR TOKENSCOPE_NSIS_CHECK)
  set(_tokenscope_exe "")
  if(WIN32)
    set(_tokenscope_exe ".exe")
  endif()
  set(CPACK_NSIS_PACKAGE_NAME "tokenscope")
  set(CPACK_NSIS_DISPLAY_NAME "tokenscope ${PROJECT_VERSION}")
  set(CPACK_PACKAGE_INSTALL_REGISTRY_KEY "tokenscope")
  set(CPACK_NSIS_INSTALL_ROOT "$PROGRAMFILES64")
  set(CPACK_NSIS_MUI_ICON "${PROJECT_SOURCE_DIR}/resources/icons/tokenscope.ico")
  set(CPACK_NSIS_MUI_UNIICON "${PROJECT_SOURCE_DIR}/resources/icons/tokenscope.ico")
  set(CPACK_NSIS_INSTALLED_ICON_NAME "bin\\tokenscope${_tokenscope_exe}")  # Apps & features
  set(CPACK_NSIS_MANIFEST_DPI_AWARE ON)
  set(CPACK_NSIS_ENABLE_UNINSTALL_BEFORE_INSTALL ON)
  set(CPACK_NSIS_IGNORE_LICENSE_PAGE ON)  # no license file yet (CPack's default is a placeholder)
  # Start menu: one shortcut to the app (CPACK_PACKAGE_EXECUTABLES, in bin/) plus the
  # uninstaller, which CPack always adds. A desktop shortcut is offered as a check box on the
  # "Install Options" page; that page only exists when CPACK_NSIS_MODIFY_PATH is ON, so it is
  # ON here (it also offers to put bin\ on PATH for tokenscope-cli; the default is not to).
  set(CPACK_PACKAGE_EXECUTABLES "tokenscope;tokenscope")
  set(CPACK_CREATE_DESKTOP_LINKS "tokenscope")
  set(CPACK_NSIS_MODIFY_PATH ON)
  set(CPACK_NSIS_MUI_FINISHPAGE_RUN "tokenscope${_tokenscope_exe}")
  # A second Start-menu entry for the console tool: a command prompt in bin\ showing its help.
  # (A shortcut's working directory is $OUTDIR when it is created.)
  set(CPACK_NSIS_CREATE_ICONS_EXTRA [=[
  SetOutPath "$INSTDIR\bin"
  CreateShortCut "$SMPROGRAMS\$STARTMENU_FOLDER\tokenscope command line.lnk" "$SYSDIR\cmd.exe" "/K tokenscope-cli --help"]=])
  set(CPACK_NSIS_DELETE_ICONS_EXTRA
      [=[  Delete "$SMPROGRAMS\$MUI_TEMP\tokenscope command line.lnk"]=])
  # The cuda component starts unticked (DISABLED below). When the NVIDIA driver's nvcuda.dll is
  # present the components page starts with it ticked: MUI calls this function when the
  # installer window opens (after .onInit has read the previous selection). The section is
  # found by its display name because the section index is defined after this code. Silent
  # installs (/S) have no window and keep the default. CPACK_NSIS_INSTALLER_MUI_ICON_CODE is
  # the hook CPack places before the pages; setting it replaces CPack's icon defines, so they
  # are written here too.
  set(CPACK_NSIS_INSTALLER_MUI_ICON_CODE "
!define MUI_ICON \"${CPACK_NSIS_MUI_ICON}\"
!define MUI_UNICON \"${CPACK_NSIS_MUI_UNIICON}\"
!define MUI_CUSTOMFUNCTION_GUIINIT tokenscopeSelectCudaWithGpu
Function tokenscopeSelectCudaWithGpu
  IfFileExists \"$WINDIR\\Sysnative\\nvcuda.dll\" gpu 0
  IfFileExists \"$WINDIR\\System32\\nvcuda.dll\" gpu done
gpu:
  StrCpy $R1 0
next_section:
  IntCmp $R1 64 done
  ClearErrors
  SectionGetText $R1 $R2
  IfErrors done
  StrCmp $R2 \"${TOKENSCOPE_CUDA_COMPONENT_TITLE}\" 0 not_cuda
    SectionGetFlags $R1 $R3
    IntOp $R3 $R3 | 1
    SectionSetFlags $R1 $R3
    Goto done
not_cuda:
  IntOp $R1 $R1 + 1
  Goto next_section
done:
FunctionEnd
")
endif()

# --- WiX (Windows, optional alternative: cpack -G WIX, WiX Toolset 3) ------------------------
if(WIN32)
  set(CPACK_WIX_UPGRADE_GUID "35CECCF2-139C-4B7C-92AB-66F22FA17969")  # never change it
  set(CPACK_WIX_PRODUCT_ICON "${PROJECT_SOURCE_DIR}/resources/icons/tokenscope.ico")
  set(CPACK_WIX_PROGRAM_MENU_FOLDER "tokenscope")
  set(CPACK_WIX_ROOT_FEATURE_TITLE "tokenscope")
endif()

include(CPack)

cpack_add_component(runtime
  DISPLAY_NAME "tokenscope"
  DESCRIPTION "The desktop app and tokenscope-cli (CPU backend)."
  REQUIRED)
if(TOKENSCOPE_HAVE_LINUX_BUNDLE)
  cpack_add_component(bundle
    DISPLAY_NAME "Bundled libraries"
    DESCRIPTION "Qt 6, ICU, spdlog, fmt and sentencepiece for the portable archive."
    HIDDEN)
endif()
if(TARGET tokenscope_cuda)
  cpack_add_component(cuda
    DISPLAY_NAME "${TOKENSCOPE_CUDA_COMPONENT_TITLE}"
    DESCRIPTION "The CUDA backend for NVIDIA GPUs (needs the NVIDIA driver). Ticked when a driver is found."
    DEPENDS runtime
    DISABLED)
endif()
