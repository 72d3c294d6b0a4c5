# flaxpp_find_nvidia_library(PREFIX HEADER VERSION_HEADER LIBRARIES VERSION_PARTS): the shared
# body of FindCUDNN and FindNCCL. Looks for HEADER and one of LIBRARIES (versioned names
# included: the nvidia-* Python wheels ship no unversioned symlink) under ${PREFIX}_ROOT (cmake
# or environment variable), the CUDA toolkit and the system; reads the version from the
# `#define ${PREFIX}_<part>` lines of VERSION_HEADER (HEADER where it does not exist). Defines
# ${PREFIX}_FOUND, ${PREFIX}_VERSION, ${PREFIX}_INCLUDE_DIR, ${PREFIX}_LIBRARY and
# ${PREFIX}_LIBRARY_DIR.
include(FindPackageHandleStandardArgs)

macro(flaxpp_find_nvidia_library prefix header version_header libraries version_parts)
  set(_hints ${${prefix}_ROOT} $ENV{${prefix}_ROOT})
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND _hints ${CUDAToolkit_LIBRARY_ROOT})
  endif()
  find_path(${prefix}_INCLUDE_DIR ${header} HINTS ${_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(${prefix}_LIBRARY NAMES ${libraries} NAMES_PER_DIR
               HINTS ${_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64 lib/x64)
  if(${prefix}_INCLUDE_DIR)
    set(_version_header "${${prefix}_INCLUDE_DIR}/${version_header}")
    if(NOT EXISTS "${_version_header}")
      set(_version_header "${${prefix}_INCLUDE_DIR}/${header}")
    endif()
    file(STRINGS "${_version_header}" _defines REGEX "#define ${prefix}_[A-Z]+ ")
    set(${prefix}_VERSION "")
    foreach(_part ${version_parts})
      string(REGEX MATCH "${prefix}_${_part} +([0-9]+)" _m "${_defines}")
      list(APPEND ${prefix}_VERSION "${CMAKE_MATCH_1}")
    endforeach()
    list(JOIN ${prefix}_VERSION "." ${prefix}_VERSION)
  endif()
  find_package_handle_standard_args(${prefix} REQUIRED_VARS ${prefix}_LIBRARY ${prefix}_INCLUDE_DIR
                                    VERSION_VAR ${prefix}_VERSION)
  if(${prefix}_FOUND)
    get_filename_component(${prefix}_LIBRARY_DIR "${${prefix}_LIBRARY}" DIRECTORY)
  endif()
  mark_as_advanced(${prefix}_INCLUDE_DIR ${prefix}_LIBRARY)
endmacro()
