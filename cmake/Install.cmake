# Installation: libpowerinfer.so, powerinfer.h, the CMake package (find_package(powerinfer) gives
# powerinfer::powerinfer), the pkg-config file and the command-line tools.
#
# The shared library links its static internals and oneTBB privately, so the exported target
# carries only the library itself: consumers need no internal target and no find_dependency.
include(CMakePackageConfigHelpers)

set(POWERINFER_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/powerinfer" CACHE STRING
    "Where powerinfer-config.cmake is installed, relative to the prefix")

# Windows: powerinfer.dll is a RUNTIME artifact (bin/, beside the tools), its import library an
# ARCHIVE one (lib/).
install(TARGETS powerinfer EXPORT powerinfer-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT Runtime
    NAMELINK_COMPONENT Development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT Runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT Development
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT Development)

install(EXPORT powerinfer-targets
  NAMESPACE powerinfer::
  DESTINATION ${POWERINFER_INSTALL_CMAKEDIR}
  COMPONENT Development)

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/powerinfer-config.cmake.in
  ${PROJECT_BINARY_DIR}/powerinfer-config.cmake
  INSTALL_DESTINATION ${POWERINFER_INSTALL_CMAKEDIR})
# The SONAME changes with the major version, so only the same major version is compatible.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/powerinfer-config-version.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/powerinfer-config.cmake
  ${PROJECT_BINARY_DIR}/powerinfer-config-version.cmake
  DESTINATION ${POWERINFER_INSTALL_CMAKEDIR}
  COMPONENT Development)

# powerinfer.pc gets its prefix at install time because `cmake --install --prefix` may choose
# another prefix than the configured one. A prefix derived from ${pcfiledir} is no alternative:
# for a system install it yields -I/usr/lib/<triplet>/pkgconfig/../../../include, which
# pkg-config does not filter as a system folder and which breaks #include_next in C++ headers.
foreach(_pi_dir INCLUDEDIR LIBDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_pi_dir}}")
    set(PI_PC_${_pi_dir} "${CMAKE_INSTALL_${_pi_dir}}")
  else()
    set(PI_PC_${_pi_dir} "\${prefix}/${CMAKE_INSTALL_${_pi_dir}}")
  endif()
endforeach()
set(PI_PC_PREFIX "@PI_PC_PREFIX@") # kept for the install-time pass
configure_file(${CMAKE_CURRENT_LIST_DIR}/powerinfer.pc.in
  ${PROJECT_BINARY_DIR}/pkgconfig/powerinfer.pc.in @ONLY)
install(CODE "
  set(PI_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  cmake_path(ABSOLUTE_PATH PI_PC_PREFIX NORMALIZE) # --prefix may be relative
  configure_file([[${PROJECT_BINARY_DIR}/pkgconfig/powerinfer.pc.in]]
    [[${PROJECT_BINARY_DIR}/pkgconfig/powerinfer.pc]] @ONLY)
" COMPONENT Development)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/powerinfer.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT Development)

# Installed tools find libpowerinfer.so without LD_LIBRARY_PATH ($ORIGIN, @loader_path on
# macOS); on Windows powerinfer.dll is installed beside them.
if(IS_ABSOLUTE "${CMAKE_INSTALL_BINDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_pi_tool_rpath "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH _pi_bin_to_lib
    /prefix/${CMAKE_INSTALL_BINDIR} /prefix/${CMAKE_INSTALL_LIBDIR})
  if(APPLE)
    set(_pi_tool_rpath "@loader_path/${_pi_bin_to_lib}")
  else()
    set(_pi_tool_rpath "$ORIGIN/${_pi_bin_to_lib}")
  endif()
endif()
foreach(_pi_tool powerinfer-cli pi-make-model pi-quantize pi-perplexity pi-bench pi-server pi-soak)
  if(TARGET ${_pi_tool})
    set_target_properties(${_pi_tool} PROPERTIES INSTALL_RPATH "${_pi_tool_rpath}")
    install(TARGETS ${_pi_tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Tools)
  endif()
endforeach()
