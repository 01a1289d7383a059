# cmake --install: libumem, its headers, umtopo, and a package config for find_package(umem).
include(CMakePackageConfigHelpers)

install(TARGETS umem EXPORT umemTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS umtopo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT umemTargets NAMESPACE umem:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/umem)

configure_package_config_file(cmake/umemConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/umemConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/umem)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/umemConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/umemConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/umemConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/umem)
