# Warning and sanitizer settings as interface targets, so they attach to our targets only.
add_library(flaxpp_warnings INTERFACE)
target_compile_options(flaxpp_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  # nvcc's generated host code trips -Wpedantic ("style of line directive is a GCC
  # extension"), so CUDA sources get the plain warnings only and no -Werror on them.
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(FLAXPP_WERROR)
  target_compile_options(flaxpp_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

add_library(flaxpp_sanitizers INTERFACE)
if(FLAXPP_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "FLAXPP_FUZZ=ON needs clang, whose libFuzzer the fuzz targets link: configure "
                      "with CXX=clang++ (Debian: apt-get install clang libclang-rt-14-dev)")
endif()
if(FLAXPP_SANITIZE OR FLAXPP_FUZZ)
  set(_flaxpp_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(FLAXPP_FUZZ)
    # Coverage feedback for libFuzzer in all our code; only the fuzz targets link its main.
    list(APPEND _flaxpp_san -fsanitize=fuzzer-no-link)
  endif()
  target_compile_options(flaxpp_sanitizers INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_flaxpp_san}>)
  target_link_options(flaxpp_sanitizers INTERFACE ${_flaxpp_san})
endif()
