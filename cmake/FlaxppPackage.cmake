# Install rules and the package config, so that `find_package(flaxpp)` + `flaxpp::flaxpp`
# work after `cmake --install`.
include(CMakePackageConfigHelpers)

# flaxpp::flaxpp is an interface target over one library per layer (src/CMakeLists.txt);
# flaxpp::tools, the reference checker and the spec parsers (flaxpp/io/refs.hpp,
# policy_spec.hpp, optimizer_spec.hpp, train_config.hpp), links on top of it.
set_target_properties(flaxpp_tools PROPERTIES EXPORT_NAME tools)
install(TARGETS flaxpp flaxpp_core flaxpp_random flaxpp_ir flaxpp_backend flaxpp_transforms
                flaxpp_ops flaxpp_nn flaxpp_optim flaxpp_data flaxpp_dist flaxpp_train flaxpp_io
                flaxpp_tools
        EXPORT flaxppTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS flaxpp_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/flaxpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT flaxppTargets NAMESPACE flaxpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flaxpp)

configure_package_config_file(cmake/flaxppConfig.cmake.in
                              "${CMAKE_CURRENT_BINARY_DIR}/flaxppConfig.cmake"
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flaxpp)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/flaxppConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/flaxppConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/flaxppConfigVersion.cmake"
              cmake/FindCUDNN.cmake
              cmake/FindNCCL.cmake
              cmake/FindOneDNN.cmake
              cmake/FlaxppFindNvidiaLibrary.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flaxpp)
