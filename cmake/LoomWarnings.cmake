# loom_enable_warnings(<target>): -Wall -Wextra for host code, the same for
# nvcc's host pass, and -Werror when LOOM_WERROR is on.
function(loom_enable_warnings target)
  set(host_flags -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${host_flags}>)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>)
  if(LOOM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endfunction()
