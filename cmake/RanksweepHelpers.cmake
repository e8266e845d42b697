# ranksweep_add_test(NAME name SOURCES a.cc b.cc LIBS x y [LABELS l] [TIMEOUT s])
# One GoogleTest binary, registered test by test with CTest.
function(ranksweep_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT RANKSWEEP_BUILD_TESTS)
    return()
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gmock GTest::gtest_main)
  # The test's own files are compiled without optimization: the code under
  # test is in the libraries, built as the build type says, while -O2 makes
  # a test file's compile 1.6-2.1 times as long as -O0, and test files are
  # over 40% of the build. Their options replace the build type's (the top
  # CMakeLists.txt puts those on each target), so a test file compiles alike
  # in every build type and the compiler cache builds it once for both
  # builds of `./scripts/test`. A trainer test is the exception: its
  # assertions on trained numbers may depend on code generation, and its
  # files instantiate the trainer's inline math.
  if(NOT "ranksweep_trainer" IN_LIST T_LIBS)
    set_property(TARGET ${T_NAME} PROPERTY COMPILE_OPTIONS -O0 -g)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  # Tests that start processes take seconds, unit tests milliseconds: CTest
  # starts the costliest first (see fuzz_spec_parsers in tests/CMakeLists.txt).
  set(T_COST 0)
  if("integration" IN_LIST T_LABELS OR "reliability" IN_LIST T_LABELS)
    set(T_COST 5)
  endif()
  # Workers started by a test without --outbox-dir keep their default outbox
  # (under $XDG_STATE_HOME) in the build tree, not in the home directory.
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}" COST ${T_COST}
               ENVIRONMENT "XDG_STATE_HOME=${CMAKE_BINARY_DIR}/test-state")
endfunction()
