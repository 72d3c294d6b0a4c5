# FindOneDNN: locates oneDNN (header oneapi/dnnl/dnnl.hpp and library libdnnl), for the CPU's
# float32 products. Debian's own dnnl-config.cmake requires the OpenCL headers for its GPU
# runtime, which flaxpp never uses, so flaxpp finds the two files itself.
# Hints: OneDNN_ROOT (cmake or environment variable). Defines OneDNN_FOUND, OneDNN_VERSION and
# the imported target OneDNN::dnnl.
find_path(OneDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(OneDNN_LIBRARY NAMES dnnl)
if(OneDNN_INCLUDE_DIR AND EXISTS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _onednn_version_lines
       REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  set(_onednn_parts)
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "DNNL_VERSION_${part} ([0-9]+)" _ "${_onednn_version_lines}")
    list(APPEND _onednn_parts "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN _onednn_parts "." OneDNN_VERSION)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OneDNN REQUIRED_VARS OneDNN_LIBRARY OneDNN_INCLUDE_DIR
                                  VERSION_VAR OneDNN_VERSION)
mark_as_advanced(OneDNN_INCLUDE_DIR OneDNN_LIBRARY)
if(OneDNN_FOUND AND NOT TARGET OneDNN::dnnl)
  add_library(OneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(OneDNN::dnnl PROPERTIES IMPORTED_LOCATION "${OneDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${OneDNN_INCLUDE_DIR}")
endif()
