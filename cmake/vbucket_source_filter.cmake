# vbucket_sources_matching(<out> <regex> <source>...): the sources with a line matching <regex>
# (file(STRINGS) REGEX: CMake's regular expressions, no case-insensitive flag), in their order.
# Used by the test and fuzz builds to pick the suites a job needs by what they contain.
function(vbucket_sources_matching out regex)
  set(_matching "")
  foreach(_source IN LISTS ARGN)
    file(STRINGS "${_source}" _lines REGEX "${regex}")
    if(_lines)
      list(APPEND _matching "${_source}")
    endif()
  endforeach()
  set(${out} "${_matching}" PARENT_SCOPE)
endfunction()
