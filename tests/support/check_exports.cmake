# libloom.so exports the public API and nothing of loom's internals: nothing
# in loom::detail or loom::kernels, and the type information of every
# exception class (so that a program catches them by type) and of loom::Op.
# Arguments: NM, LIBRARY.
execute_process(COMMAND ${NM} -D --defined-only -C ${LIBRARY}
  RESULT_VARIABLE rc OUTPUT_VARIABLE symbols ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${LIBRARY}: ${err}")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(internal "")
set(count 0)
foreach(line IN LISTS lines)
  # "<address> <type> <name>": the name's own scope, not its parameters.
  if(line MATCHES "^[0-9a-f]+ [A-Za-z] ((non-)?virtual thunk to |(typeinfo name|typeinfo|vtable|VTT|construction vtable|guard variable) for )?loom::(detail|kernels)::")
    list(APPEND internal "${line}")
  endif()
  if(line MATCHES " loom::")
    math(EXPR count "${count} + 1")
  endif()
endforeach()
set(missing "")
foreach(type Error CudaError NcclError MpiError CommError InvalidArgument OutOfMemory Cancelled
             NoDevice InternalError Op)
  if(NOT symbols MATCHES "\n[0-9a-f]+ [A-Za-z] typeinfo for loom::${type}\n")
    list(APPEND missing "typeinfo for loom::${type}")
  endif()
endforeach()
foreach(function "loom::version()" "loom::device_report[abi:cxx11]()"
                 "loom::Runtime::Runtime(loom::RuntimeOptions)" "loom::Graph::validate() const"
                 "loom::Tensor::slice(int, long, long, long) const" "loom::ops::fill(loom::Tensor const&, float)")
  string(FIND "${symbols}" " ${function}\n" at)
  if(at EQUAL -1)
    list(APPEND missing "${function}")
  endif()
endforeach()
if(internal OR missing)
  string(REPLACE ";" "\n  " internal "${internal}")
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "${LIBRARY}:\nexports internals:\n  ${internal}\ndoes not export:\n  ${missing}")
endif()
message(STATUS "${LIBRARY} exports ${count} loom symbols, none internal")
