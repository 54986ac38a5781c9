# loom_check_single_loom(): every program and shared library of this build
# links at most one of the two libraries made of loom's objects: loom
# (libloom.so, for users) or loom_internal (static, for loom's own tests and
# benchmarks). One process with both has two copies of loom's globals (the
# logger, the thread-local roles, the CUDA objects they cache) that do not
# know of each other: a configure-time error is cheaper than that bug.
# Call it once, at the end of the top-level CMakeLists.txt.

# The targets that `target` links, directly and through usage requirements.
function(_loom_link_closure target out)
  set(seen "")
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    if(current IN_LIST seen OR NOT TARGET ${current})
      continue()
    endif()
    get_target_property(aliased ${current} ALIASED_TARGET)
    if(aliased)
      list(APPEND queue ${aliased})
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(imported ${current} IMPORTED)
    if(imported)
      continue()  # the system's libraries do not lead back to loom
    endif()
    set(items "")
    get_target_property(type ${current} TYPE)
    if(current STREQUAL target AND NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(items ${current} LINK_LIBRARIES)
    endif()
    get_target_property(interface ${current} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS items interface)
      # $<LINK_ONLY:x> and $<BUILD_INTERFACE:x> name x; other generator
      # expressions and directory markers (::@...) are not followed.
      string(REGEX REPLACE "^\\$<(LINK_ONLY|BUILD_INTERFACE):(.*)>$" "\\2" item "${item}")
      if(item AND NOT item MATCHES "^(\\$<|::@)")
        list(APPEND queue ${item})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(_loom_targets_in directory out)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    _loom_targets_in(${subdirectory} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(loom_check_single_loom)
  _loom_targets_in(${PROJECT_SOURCE_DIR} targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$" OR target STREQUAL "loom")
      continue()
    endif()
    _loom_link_closure(${target} closure)
    if("loom" IN_LIST closure AND "loom_internal" IN_LIST closure)
      message(FATAL_ERROR
        "loom: ${target} links both loom (libloom.so) and loom::internal: a program links "
        "exactly one of them (loom::loom or loom::cuda_interop for the public API, "
        "loom::internal for loom's own tests and benchmarks). See src/CMakeLists.txt.")
    endif()
  endforeach()
endfunction()
