# Install locations, relative to the install prefix. Included before the targets: tdgen needs
# the templates directory relative to its own (TensorDictInstall.cmake installs everything).

include(GNUInstallDirs)

set(TENSORDICT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/TensorDict" CACHE STRING
    "Where the TensorDict CMake package goes, relative to the install prefix")
set(TENSORDICT_INSTALL_TEMPLATESDIR "${CMAKE_INSTALL_DATADIR}/tensordict/templates" CACHE STRING
    "Where tdgen's templates go, relative to the install prefix")
mark_as_advanced(TENSORDICT_INSTALL_CMAKEDIR TENSORDICT_INSTALL_TEMPLATESDIR)
