# Installs tensordict-cpp as a relocatable CMake package (docs/cmake.md):
#
#   <prefix>/include/tensordict/...              public headers
#   <prefix>/<libdir>/libtensordict.*            the runtime (TensorDict::runtime)
#   <prefix>/bin/tdgen, tdtool                   the generator (TensorDict::tdgen) and the tool
#   <prefix>/share/tensordict/templates/         tdgen's templates
#   <prefix>/<libdir>/pkgconfig/tensordict.pc    for builds without CMake
#   <prefix>/<libdir>/cmake/TensorDict/          TensorDictConfig.cmake, ConfigVersion, Targets,
#                                                TensorDictGenerate.cmake (tensordict_generate)
#
# Every installed CMake file locates the prefix from its own location, so the tree can be moved.

# The directories come from TensorDictInstallDirs.cmake (included before the targets, since tdgen
# bakes in where its templates are relative to itself).

include(CMakePackageConfigHelpers)

install(DIRECTORY "${PROJECT_SOURCE_DIR}/runtime/include/tensordict"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT development
        FILES_MATCHING PATTERN "*.h")

install(TARGETS tensordict_runtime
        EXPORT TensorDictTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT development
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT runtime
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime)

# The generator is optional (TENSORDICT_BUILD_GENERATOR, needs yaml-cpp); the package says
# whether it has it, and tensordict_generate() reports a missing TensorDict::tdgen clearly.
set(TENSORDICT_PACKAGE_HAS_TDGEN OFF)
if(TARGET tdgen)
  set(TENSORDICT_PACKAGE_HAS_TDGEN ON)
  set_target_properties(tdgen PROPERTIES EXPORT_NAME tdgen)
  install(TARGETS tdgen EXPORT TensorDictTargets
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT development)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/templates/"
          DESTINATION "${TENSORDICT_INSTALL_TEMPLATESDIR}"
          COMPONENT development)
endif()
if(TARGET tdtool)
  set_target_properties(tdtool PROPERTIES EXPORT_NAME tdtool)
  install(TARGETS tdtool EXPORT TensorDictTargets
          RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime)
endif()

# Libraries of optional backends that the runtime links: a consumer linking the (static) runtime
# needs their imported targets too, so the package config finds them.
get_target_property(runtime_links tensordict_runtime LINK_LIBRARIES)
set(TENSORDICT_PACKAGE_LINKS_HDF5 OFF)
set(TENSORDICT_PACKAGE_LINKS_REDIS OFF)
set(TENSORDICT_PACKAGE_LINKS_CSV OFF)
if(runtime_links MATCHES "HDF5::|hdf5")
  set(TENSORDICT_PACKAGE_LINKS_HDF5 ON)
  set(TENSORDICT_PACKAGE_HDF5_LIBRARIES "${HDF5_C_LIBRARIES}")
endif()
if(runtime_links MATCHES "HIREDIS|hiredis")
  set(TENSORDICT_PACKAGE_LINKS_REDIS ON)
endif()
if(runtime_links MATCHES "LibCSV::")
  set(TENSORDICT_PACKAGE_LINKS_CSV ON)
endif()

# tensordict.pc for builds without CMake. LibTorch's flags come from the LibTorch this build
# found: its include dirs, its required compile flags (the C++ ABI), its libraries' directory.
get_filename_component(tensordict_torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
set(TENSORDICT_PC_TORCH_CFLAGS "${TORCH_CXX_FLAGS}")
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  # -I of a system directory would break the compiler's own #include_next chain.
  if(NOT dir MATCHES "^/usr(/local)?/include/?$")
    string(APPEND TENSORDICT_PC_TORCH_CFLAGS " -I${dir}")
  endif()
endforeach()
set(TENSORDICT_PC_TORCH_LIBS
    "-L${tensordict_torch_libdir} -Wl,-rpath,${tensordict_torch_libdir} -ltorch -ltorch_cpu -lc10")
if(TENSORDICT_PACKAGE_LINKS_HDF5)
  # The libraries FindHDF5 found, by path: Debian keeps libhdf5.so under hdf5/serial/, where a
  # bare -lhdf5 does not reach.
  foreach(lib IN LISTS HDF5_C_LIBRARIES)
    if(IS_ABSOLUTE "${lib}")
      string(APPEND TENSORDICT_PC_TORCH_LIBS " ${lib}")
    else()
      string(APPEND TENSORDICT_PC_TORCH_LIBS " -l${lib}")
    endif()
  endforeach()
endif()
if(TENSORDICT_PACKAGE_LINKS_REDIS)
  string(APPEND TENSORDICT_PC_TORCH_LIBS " -lhiredis")
endif()
if(TENSORDICT_PACKAGE_LINKS_CSV)
  string(APPEND TENSORDICT_PC_TORCH_LIBS " -lcsv")
endif()
file(RELATIVE_PATH TENSORDICT_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" TENSORDICT_PC_PREFIX_FROM_PCDIR "${TENSORDICT_PC_PREFIX_FROM_PCDIR}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/tensordict.pc.in" "${PROJECT_BINARY_DIR}/package/tensordict.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/package/tensordict.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
        COMPONENT development)

install(EXPORT TensorDictTargets
        NAMESPACE TensorDict::
        DESTINATION "${TENSORDICT_INSTALL_CMAKEDIR}"
        COMPONENT development)

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/TensorDictConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/package/TensorDictConfig.cmake"
  INSTALL_DESTINATION "${TENSORDICT_INSTALL_CMAKEDIR}"
  PATH_VARS TENSORDICT_INSTALL_TEMPLATESDIR)
# 0.x releases may break the API between minor versions, so only the same minor matches.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/package/TensorDictConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMinorVersion)
install(FILES
          "${PROJECT_BINARY_DIR}/package/TensorDictConfig.cmake"
          "${PROJECT_BINARY_DIR}/package/TensorDictConfigVersion.cmake"
          "${PROJECT_SOURCE_DIR}/cmake/TensorDictGenerate.cmake"  # tensordict_generate()
        DESTINATION "${TENSORDICT_INSTALL_CMAKEDIR}"
        COMPONENT development)
