# Installation and packaging: `cmake --install DIR` puts the binaries, the
# example configuration and the documentation in the usual places, and
# `cpack` (run in the build directory) makes a Debian package and a tarball
# of the same files. The package's library dependencies come from
# dpkg-shlibdeps, so they name exactly what the binaries link.
include(GNUInstallDirs)

install(TARGETS matchbook RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET matchbook-load)
  install(TARGETS matchbook-load RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET matchbook-bench)
  install(TARGETS matchbook-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/config/matchbook.toml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/matchbook)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")

set(CPACK_PACKAGE_NAME matchbook)
set(CPACK_PACKAGE_VENDOR "Matchbook")
set(CPACK_PACKAGE_CONTACT "Matchbook maintainers <maintainers@users.noreply.a-seed-426071f0.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Spot exchange core: deterministic matching engine, journal, Binance-compatible API")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
