# Finds cuDNN's frontend, the header-only C++ library over cuDNN's graph API (flaxpp uses its
# scaled-dot-product-attention graphs). Its headers are taken from CUDNN_FRONTEND_INCLUDE_DIR
# when set, else from PyPI's nvidia-cudnn-frontend wheel (which ships them under include/),
# downloaded once, its hash checked, into the source tree's .cache/ (ignored by git). Offline,
# the frontend is not found and flaxpp builds without it.
#
# Sets CudnnFrontend_FOUND, CudnnFrontend_VERSION and the INTERFACE target
# CudnnFrontend::CudnnFrontend (its headers as system headers: flaxpp's warnings stay on flaxpp's
# own code).
set(_flaxpp_fe_version 1.32.0)
set(_flaxpp_fe_wheel
    "nvidia_cudnn_frontend-${_flaxpp_fe_version}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
set(_flaxpp_fe_url
    "https://files.pythonhosted.org/packages/11/02/660e2dd9f9d9f940e1641443771730612c3aadaafbc5ef7a93cc313d519d/${_flaxpp_fe_wheel}")
set(_flaxpp_fe_sha256 c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0)

if(NOT CUDNN_FRONTEND_INCLUDE_DIR)
  set(_flaxpp_fe_dir "${PROJECT_SOURCE_DIR}/.cache/cudnn-frontend-${_flaxpp_fe_version}")
  if(NOT EXISTS "${_flaxpp_fe_dir}/include/cudnn_frontend.h")
    message(STATUS "flaxpp: downloading cuDNN's frontend headers ${_flaxpp_fe_version} from PyPI")
    file(DOWNLOAD "${_flaxpp_fe_url}" "${_flaxpp_fe_dir}.whl" EXPECTED_HASH
         SHA256=${_flaxpp_fe_sha256} STATUS _flaxpp_fe_status TLS_VERIFY ON)
    list(GET _flaxpp_fe_status 0 _flaxpp_fe_code)
    if(_flaxpp_fe_code EQUAL 0)
      # Into a fresh folder, renamed when complete: an interrupted extraction leaves no
      # half-written headers for the next configure to trust.
      file(REMOVE_RECURSE "${_flaxpp_fe_dir}.partial")
      file(ARCHIVE_EXTRACT INPUT "${_flaxpp_fe_dir}.whl" DESTINATION "${_flaxpp_fe_dir}.partial"
           PATTERNS "include/*")
      file(RENAME "${_flaxpp_fe_dir}.partial" "${_flaxpp_fe_dir}")
    else()
      list(GET _flaxpp_fe_status 1 _flaxpp_fe_reason)
      message(STATUS "flaxpp: cuDNN's frontend could not be downloaded (${_flaxpp_fe_reason}); "
                     "set CUDNN_FRONTEND_INCLUDE_DIR to its headers to use cuDNN's attention")
    endif()
    file(REMOVE "${_flaxpp_fe_dir}.whl")
  endif()
  set(_flaxpp_fe_hint "${_flaxpp_fe_dir}/include")
endif()

find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${_flaxpp_fe_hint} NO_DEFAULT_PATH)
if(CUDNN_FRONTEND_INCLUDE_DIR)
  file(STRINGS "${CUDNN_FRONTEND_INCLUDE_DIR}/cudnn_frontend_version.h" _flaxpp_fe_lines
       REGEX "define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION")
  string(REGEX REPLACE ".*MAJOR_VERSION ([0-9]+).*MINOR_VERSION ([0-9]+).*PATCH_VERSION ([0-9]+).*"
                       "\\1.\\2.\\3" CudnnFrontend_VERSION "${_flaxpp_fe_lines}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR
                                  VERSION_VAR CudnnFrontend_VERSION)
if(CudnnFrontend_FOUND AND NOT TARGET CudnnFrontend::CudnnFrontend)
  add_library(CudnnFrontend::CudnnFrontend INTERFACE IMPORTED)
  set_target_properties(CudnnFrontend::CudnnFrontend PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_FRONTEND_INCLUDE_DIR}"
                        INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${CUDNN_FRONTEND_INCLUDE_DIR}")
endif()
