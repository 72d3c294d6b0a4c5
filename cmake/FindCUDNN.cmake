# FindCUDNN: locates cuDNN 9 (header cudnn.h and library libcudnn, or the wheel's libcudnn.so.9).
# Hints: CUDNN_ROOT (cmake or environment variable), the CUDA toolkit prefix, and the
# `nvidia-cudnn-cu*` Python wheel layout (<site-packages>/nvidia/cudnn/{include,lib}).
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_LIBRARY_DIR and the imported target CUDNN::cudnn.
# libcudnn.so.9 loads its sub-libraries (libcudnn_graph.so.9, libcudnn_engines_*.so.9) by
# soname at run time: where they are not on the loader's path (the wheel), CUDNN_LIBRARY_DIR
# must be on LD_LIBRARY_PATH, or cuDNN fails to start and flaxpp falls back to its kernels.
include(FlaxppFindNvidiaLibrary)
flaxpp_find_nvidia_library(CUDNN cudnn.h cudnn_version.h "cudnn;libcudnn.so.9"
                           "MAJOR;MINOR;PATCHLEVEL")
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
