# Installation and packaging: `cmake --install DIR` puts the binaries, the
# example configuration and the documentation in the usual places, and
# `cpack` (run in the build directory) makes a Debian package and a tarball
# of the same files. The package's library dependencies come from
# dpkg-shlibdeps, so they name exactly what the binaries link.
#
# The Debian package is a system service: the configuration as a conffile
# (/etc/matchbook/matchbook.toml, its data directory /var/lib/matchbook), a
# systemd unit running `matchbook serve` as the `matchbook` user, and
# maintainer scripts (packaging/debian) that create the user and the state
# directory and, on purge, remove that directory. scripts/deb_test.sh checks
# it: lintian, systemd-analyze verify, install, run, remove, purge.
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
# The system configuration: the example's, with its data in /var/lib/matchbook.
set(mb_pkg_bin ${PROJECT_BINARY_DIR}/packaging)
file(READ ${PROJECT_SOURCE_DIR}/config/matchbook.toml mb_config)
string(REPLACE "\ndata_dir = \"data\"\n" "\ndata_dir = \"/var/lib/matchbook\"\n" mb_system_config
               "${mb_config}")
if(mb_system_config STREQUAL mb_config)
  message(FATAL_ERROR "config/matchbook.toml: no `data_dir = \"data\"` line to point at /var/lib")
endif()
file(CONFIGURE OUTPUT ${mb_pkg_bin}/matchbook.toml CONTENT "${mb_system_config}" @ONLY)
string(TIMESTAMP mb_changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(CONFIGURE OUTPUT ${mb_pkg_bin}/changelog CONTENT
"matchbook (${PROJECT_VERSION}) unstable; urgency=medium

  * Matchbook ${PROJECT_VERSION}: see /usr/share/doc/matchbook/README.md.

 -- Matchbook maintainers <maintainers@users.noreply.a-seed-426071f0.example>  ${mb_changelog_date}
")
file(CONFIGURE OUTPUT ${mb_pkg_bin}/conffiles CONTENT "/etc/matchbook/matchbook.toml\n")
install(CODE "set(MB_PKG_SRC \"${PROJECT_SOURCE_DIR}/packaging\")
set(MB_PKG_BIN \"${mb_pkg_bin}\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/packaging/install_system_files.cmake)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Prometheus alerting rules (and their unit tests) and the Grafana dashboard.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/prometheus/alerts.yml
              ${PROJECT_SOURCE_DIR}/deploy/prometheus/alerts_test.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/matchbook/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/grafana/matchbook.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/matchbook/grafana)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md" PATTERN "*.svg" PATTERN "*.png")

set(CPACK_PACKAGE_NAME matchbook)
set(CPACK_PACKAGE_VENDOR "Matchbook")
set(CPACK_PACKAGE_CONTACT "Matchbook maintainers <maintainers@users.noreply.a-seed-426071f0.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "spot exchange core: deterministic matching engine, Binance-compatible API")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, init-system-helpers (>= 1.52)")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Matchbook is a spot crypto exchange core: a single-threaded deterministic
matching engine with price-time priority, wallets with a double-entry
ledger, an event journal with snapshots and replay, and a Binance-compatible
REST and WebSocket API. This package runs it as the matchbook.service
systemd unit on /etc/matchbook/matchbook.toml, with its data in
/var/lib/matchbook.")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${mb_pkg_bin}/conffiles;${PROJECT_SOURCE_DIR}/packaging/debian/postinst;${PROJECT_SOURCE_DIR}/packaging/debian/prerm;${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)
include(CPack)
