# Install-time script of the `bundle` component (only the portable .tar.gz takes it; see
# cmake/TokenscopeLinuxBundle.cmake). Copies into <prefix>/lib the shared libraries that a
# desktop Linux may lack or have in another version — Qt 6, ICU, spdlog, fmt, sentencepiece and
# their small helpers — and Qt's platform, GL-integration, input-context and SQL plugins into
# <prefix>/plugins, and writes bin/qt.conf so that Qt finds them. The executables carry
# DT_RPATH $ORIGIN/../lib, which the dynamic loader also applies to the libraries and plugins
# they load, so nothing needs LD_LIBRARY_PATH. What stays with the system: glibc, libstdc++,
# libgcc, X11/xcb core, GL/EGL, fontconfig, freetype, glib, dbus (present on any desktop and
# tied to its drivers and configuration).
#
# Variables set by the install(CODE) before this script: TOKENSCOPE_BUNDLE_EXECUTABLES (the
# built programs), TOKENSCOPE_BUNDLE_QT_PLUGIN_DIR, TOKENSCOPE_BUNDLE_PLUGINS (relative paths
# under it).
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(modules "")
foreach(plugin IN LISTS TOKENSCOPE_BUNDLE_PLUGINS)
  set(source "${TOKENSCOPE_BUNDLE_QT_PLUGIN_DIR}/${plugin}")
  if(NOT EXISTS "${source}")
    message(STATUS "bundle: Qt plugin ${plugin} is not installed here, skipped")
    continue()
  endif()
  get_filename_component(subdir "${plugin}" DIRECTORY)
  file(INSTALL DESTINATION "${prefix}/plugins/${subdir}" TYPE SHARED_LIBRARY FILES "${source}")
  list(APPEND modules "${source}")
endforeach()

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${TOKENSCOPE_BUNDLE_EXECUTABLES}
  MODULES ${modules}
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved)
if(unresolved)
  message(FATAL_ERROR "bundle: unresolved libraries: ${unresolved}")
endif()
set(bundled "")
foreach(library IN LISTS resolved)
  get_filename_component(name "${library}" NAME)
  # Qt and ICU, our own dependencies and Qt's small helpers, and the xcb utility libraries that
  # minimal desktops often lack (Qt's "could not load the xcb platform plugin"); the core
  # libxcb and its protocol extensions stay with the system's libxcb.
  if(name MATCHES "^lib(Qt6[A-Za-z]+|icu(data|i18n|uc)|spdlog|fmt|sentencepiece(_train)?|protobuf-lite|double-conversion|pcre2-16|md4c|b2|gomp|sqlite3|xkbcommon-x11|xcb-(icccm|image|keysyms|render-util|util|xinerama|xkb|cursor|xinput))\\.so")
    file(INSTALL DESTINATION "${prefix}/lib" TYPE SHARED_LIBRARY FOLLOW_SYMLINK_CHAIN FILES "${library}")
    list(APPEND bundled "${name}")
  endif()
endforeach()
list(LENGTH bundled count)
message(STATUS "bundle: ${count} libraries into lib/: ${bundled}")

file(WRITE "${prefix}/bin/qt.conf" "# Written by the portable bundle: Qt's plugins live in ../plugins.\n[Paths]\nPrefix = ..\nPlugins = plugins\n")
