# FindCUDNN: locates cuDNN 9 (header cudnn.h and library libcudnn).
# Hints: CUDNN_ROOT (cmake or environment variable), the CUDA toolkit prefix, and the
# `nvidia-cudnn-cu*` Python wheel layout (<site-packages>/nvidia/cudnn/{include,lib}).
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_LIBRARY_DIR and the imported target CUDNN::cudnn.
# libcudnn.so.9 loads its sub-libraries (libcudnn_graph.so.9, libcudnn_engines_*.so.9) by
# soname at run time: where they are not on the loader's path (the wheel), CUDNN_LIBRARY_DIR
# must be on LD_LIBRARY_PATH, or cuDNN fails to start and flaxpp falls back to its kernels.
include(FindPackageHandleStandardArgs)

set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _cudnn_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()

find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# The wheel ships only versioned names (libcudnn.so.9, no libcudnn.so symlink): look for both.
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_cudnn_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x64)

if(CUDNN_INCLUDE_DIR)
  set(_cudnn_version_header "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  if(NOT EXISTS "${_cudnn_version_header}")
    set(_cudnn_version_header "${CUDNN_INCLUDE_DIR}/cudnn.h")
  endif()
  file(STRINGS "${_cudnn_version_header}" _cudnn_defines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part} +([0-9]+)" _m "${_cudnn_defines}")
    set(_cudnn_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
endif()

find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)

if(CUDNN_FOUND)
  get_filename_component(CUDNN_LIBRARY_DIR "${CUDNN_LIBRARY}" DIRECTORY)
endif()
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
