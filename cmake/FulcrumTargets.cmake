# Helpers that give every target of ours the same strict settings.
# Third-party headers are included as SYSTEM so their warnings do not fail our build.

function(fulcrum_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wpedantic)
  target_compile_features(${target} PUBLIC cxx_std_20)
endfunction()

# fulcrum_library(NAME SOURCES ... [DEPS ...])
function(fulcrum_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  fulcrum_strict(${name})
endfunction()

# fulcrum_executable(NAME SOURCES ... [DEPS ...])
function(fulcrum_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  fulcrum_strict(${name})
endfunction()

# fulcrum_test(NAME LABEL unit|integration|e2e SOURCES ... [DEPS ...] [TIMEOUT s] [CLUSTER])
# Each test binary is one ctest entry; GoogleTest prints per-case results in the log.
# CLUSTER: the binary gets a real control plane (tests/cluster/up) for all its tests.
function(fulcrum_test name)
  cmake_parse_arguments(ARG "CLUSTER" "LABEL;TIMEOUT" "SOURCES;DEPS;ENVIRONMENT" ${ARGN})
  if(NOT ARG_LABEL)
    message(FATAL_ERROR "fulcrum_test(${name}): LABEL unit|integration|e2e is required")
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(ARG_CLUSTER)
    target_link_libraries(${name} PRIVATE ${ARG_DEPS} fulcrum_test_cluster_main GTest::gmock)
  else()
    target_link_libraries(${name} PRIVATE ${ARG_DEPS} fulcrum_test_support GTest::gmock GTest::gtest_main)
  endif()
  fulcrum_strict(${name})
  add_test(NAME ${name} COMMAND ${name} --gtest_color=no)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "FULCRUM_SOURCE_DIR=${PROJECT_SOURCE_DIR};FULCRUM_BINARY_DIR=${PROJECT_BINARY_DIR};${ARG_ENVIRONMENT}")
endfunction()
