include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS sol EXPORT SolTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/sol DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The co-design model's shipped inputs; `sol model` also looks in <prefix>/share/sol/<kind>.
install(DIRECTORY models hardware plans workloads DESTINATION ${CMAKE_INSTALL_DATADIR}/sol)
if(TARGET sol_cli)
  install(TARGETS sol_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT SolTargets NAMESPACE Sol:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Sol)
configure_package_config_file(cmake/SolConfig.cmake.in ${CMAKE_BINARY_DIR}/SolConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Sol)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SolConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SolConfig.cmake ${CMAKE_BINARY_DIR}/SolConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Sol)
