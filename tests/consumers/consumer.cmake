# The consumer program (consumer.cpp) as each consumer project builds it, header-only, and (when
# vbucket::compiled exists) the same program with the library:
#   include("${CMAKE_CURRENT_LIST_DIR}/../consumer.cmake")
function(vbucket_consumer name)
  add_executable(${name} "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/consumer.cpp")
  target_link_libraries(${name} PRIVATE vbucket::vbucket ${ARGN})
  if(TARGET vbucket::json)
    target_link_libraries(${name} PRIVATE vbucket::json)
    target_compile_definitions(${name} PRIVATE VBUCKET_CONSUMER_JSON=1)
  endif()
  # The run wing (vbucket/run/) needs its compiled library: where it exists, the program reads
  # a run spec too.
  if(TARGET vbucket::run)
    target_link_libraries(${name} PRIVATE vbucket::run)
    target_compile_definitions(${name} PRIVATE VBUCKET_CONSUMER_RUN=1)
  endif()
endfunction()
vbucket_consumer(consumer)
if(TARGET vbucket::compiled)
  vbucket_consumer(consumer_compiled vbucket::compiled)
endif()
