# CPACK_PROJECT_CONFIG_FILE: cpack includes this once per generator. The `bundle` component
# (Qt and other libraries, packaging/linux/bundle-libraries.cmake) belongs in the portable
# .tar.gz only; the .deb relies on the system's packages through its Depends.
if(CPACK_GENERATOR STREQUAL "DEB")
  list(REMOVE_ITEM CPACK_COMPONENTS_ALL bundle)
endif()
