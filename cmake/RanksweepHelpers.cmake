# ranksweep_add_test(NAME name SOURCES a.cc b.cc LIBS x y [LABELS l] [TIMEOUT s])
# One GoogleTest binary, registered test by test with CTest.
function(ranksweep_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT RANKSWEEP_BUILD_TESTS)
    return()
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gmock GTest::gtest_main)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  # Workers started by a test without --outbox-dir keep their default outbox
  # (under $XDG_STATE_HOME) in the build tree, not in the home directory.
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
               ENVIRONMENT "XDG_STATE_HOME=${CMAKE_BINARY_DIR}/test-state")
endfunction()
