# Installs the libraries, their public headers and a CMake package:
#   find_package(ddpio CONFIG REQUIRED)  ->  target ddpio::ddpio (and ddpio::storage, ...)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(_modules GLOBAL PROPERTY DDPIO_INSTALLED_MODULES)
set(_extra)
foreach(t ddpio_isal ddpio_nccl_lib)
  if(TARGET ${t})
    list(APPEND _extra ${t})
  endif()
endforeach()
install(TARGETS ${_modules} ddpio ${_extra} EXPORT ddpioTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Public headers only: include/ddpio/<module>/<file>.h, included as "ddpio/<module>/<file>.h".
# Internal headers, tests and test support stay in the source tree.
foreach(dir common device storage sampler loader convert comm broadcast pipeline trainer)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/ddpio/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddpio/${dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*_test*" EXCLUDE PATTERN "internal" EXCLUDE
          PATTERN "*_conformance*" EXCLUDE PATTERN "nccl" EXCLUDE
          PATTERN "group_feeder.h" EXCLUDE)  # the library's own: users meet feeder_options.h
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/ddpio/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ddpio)
install(EXPORT ddpioTargets NAMESPACE ddpio:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddpio)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddpioConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ddpioConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddpio)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddpioConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ddpioConfig.cmake ${PROJECT_BINARY_DIR}/ddpioConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddpio)
