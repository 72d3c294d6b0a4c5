# FindNCCL: locates NCCL 2 (header nccl.h and library libnccl, or the wheel's libnccl.so.2).
# Hints: NCCL_ROOT (cmake or environment variable), the CUDA toolkit, and the
# `nvidia-nccl-cu*` Python wheel layout (<site-packages>/nvidia/nccl/{include,lib}).
# Defines NCCL_FOUND, NCCL_VERSION, NCCL_LIBRARY_DIR and the imported target NCCL::nccl.
include(FlaxppFindNvidiaLibrary)
flaxpp_find_nvidia_library(NCCL nccl.h nccl.h "nccl;libnccl.so.2" "MAJOR;MINOR;PATCH")
if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
