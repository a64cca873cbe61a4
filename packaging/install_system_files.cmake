# Run by `cmake --install` and cpack (install(SCRIPT)): the files a system
# installation needs besides the binaries and docs. Where they go depends on
# the prefix the install runs with, known only now: with /usr (the Debian
# package) the configuration is /etc/matchbook/matchbook.toml and the unit
# /lib/systemd/system/matchbook.service; with any other prefix P they stay
# under it (P/etc/matchbook, P/lib/systemd/system).
#
# In: MB_PKG_SRC (packaging/), MB_PKG_BIN (generated files).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/"
   OR CMAKE_INSTALL_PREFIX STREQUAL "")
  set(mb_etc "/etc/matchbook")
  set(mb_units "/lib/systemd/system")
  set(mb_usr "/usr")
else()
  set(mb_etc "${CMAKE_INSTALL_PREFIX}/etc/matchbook")
  set(mb_units "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
  set(mb_usr "${CMAKE_INSTALL_PREFIX}")
endif()
set(MB_BINDIR "${mb_usr}/bin")
set(MB_ETCDIR "${mb_etc}")
set(MB_DOCDIR "${mb_usr}/share/doc/matchbook")
configure_file("${MB_PKG_SRC}/matchbook.service.in" "${MB_PKG_BIN}/matchbook.service" @ONLY)
file(INSTALL DESTINATION "${mb_etc}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${MB_PKG_BIN}/matchbook.toml")
file(INSTALL DESTINATION "${mb_units}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${MB_PKG_BIN}/matchbook.service")
# Debian wants the changelog compressed with gzip -9n (no name, no time).
execute_process(COMMAND gzip -9nc "${MB_PKG_BIN}/changelog"
                OUTPUT_FILE "${MB_PKG_BIN}/changelog.gz" RESULT_VARIABLE mb_gzip)
if(NOT mb_gzip EQUAL 0)
  message(FATAL_ERROR "gzip of the changelog failed: ${mb_gzip}")
endif()
file(INSTALL DESTINATION "${MB_DOCDIR}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${MB_PKG_BIN}/changelog.gz" "${MB_PKG_SRC}/copyright")
