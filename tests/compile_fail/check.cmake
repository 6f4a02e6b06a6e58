# One build-must-fail check (see CMakeLists.txt here):
#   cmake -DCOMPILER=c++ -DINCLUDE=<vbucket include dir> -DSOURCE=x.cpp -DMODE=ok|fail
#         -DEXPECT=<regex> -P check.cmake
# MODE ok: SOURCE compiles (-fsyntax-only) as written, so the harness and the correct use are
# sound. MODE fail: with -DVBUCKET_COMPILE_FAIL the mistake it shows is a compile error, and the
# diagnostic matches EXPECT (the concept or message a user should be pointed to).
set(ENV{LC_ALL} C)  # plain quotes in GCC's diagnostics
set(flags -std=c++20 -fsyntax-only "-I${INCLUDE}")
if(MODE STREQUAL "fail")
  list(APPEND flags -DVBUCKET_COMPILE_FAIL=1)
endif()
execute_process(
  COMMAND "${COMPILER}" ${flags} "${SOURCE}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
if(MODE STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile without VBUCKET_COMPILE_FAIL:\n${out}")
  endif()
elseif(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled with VBUCKET_COMPILE_FAIL: that mistake must be a "
                      "compile error")
elseif(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but its diagnostic does not match "
                      "'${EXPECT}':\n${out}")
else()
  message(STATUS "${SOURCE}: refused as expected ('${EXPECT}')")
endif()
