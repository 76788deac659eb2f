# The portable .tar.gz carries its own Qt and other libraries (component `bundle`, never in the
# .deb, whose Depends name the system's). Included from TokenscopePackaging.cmake on Linux.
option(TOKENSCOPE_BUNDLE_LIBRARIES "Put Qt and the other non-system libraries into the .tar.gz" ON)
if(NOT TOKENSCOPE_BUNDLE_LIBRARIES OR NOT TARGET tokenscope)
  return()
endif()

# DT_RPATH (not RUNPATH): the loader applies an executable's RPATH to the whole tree of
# libraries and plugins it loads, RUNPATH only to the executable's own direct needs. In the
# .deb the same path is /usr/lib, where the system's libraries are found anyway.
foreach(program tokenscope tokenscope-cli)
  set_target_properties(${program} PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
  target_link_options(${program} PRIVATE "LINKER:--disable-new-dtags")
endforeach()

set(_tokenscope_bundle_plugins
  platforms/libqxcb.so platforms/libqoffscreen.so platforms/libqwayland-generic.so
  xcbglintegrations/libqxcb-glx-integration.so xcbglintegrations/libqxcb-egl-integration.so
  platforminputcontexts/libcomposeplatforminputcontextplugin.so platforminputcontexts/libibusplatforminputcontextplugin.so
  sqldrivers/libqsqlite.so imageformats/libqsvg.so iconengines/libqsvgicon.so)
install(CODE "
  set(TOKENSCOPE_BUNDLE_EXECUTABLES \"$<TARGET_FILE:tokenscope>;$<TARGET_FILE:tokenscope-cli>\")
  set(TOKENSCOPE_BUNDLE_QT_PLUGIN_DIR \"${QT6_INSTALL_PREFIX}/${QT6_INSTALL_PLUGINS}\")
  set(TOKENSCOPE_BUNDLE_PLUGINS \"${_tokenscope_bundle_plugins}\")
  " COMPONENT bundle)
install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/linux/bundle-libraries.cmake COMPONENT bundle)
set(TOKENSCOPE_HAVE_LINUX_BUNDLE ON)
