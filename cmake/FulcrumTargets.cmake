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

# fulcrum_test(NAME LABEL unit|integration|e2e SOURCES ... [DEPS ...] [TIMEOUT s] [CLUSTER]
#              [COST seconds] [SHARDS n] [ENVIRONMENT ...])
# Each test binary is one ctest entry; GoogleTest prints per-case results in the log.
# SHARDS: n entries NAME_shard_KofN instead, each running every n-th case (GoogleTest's
#   GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX), so a binary of many slow cases (under the sanitizers
#   most of all) runs side by side with itself. Not with CLUSTER: each entry would start its own.
# CLUSTER: the binary gets a real control plane (tests/cluster/up) for all its tests.
# COST: about how long the test runs alone; ctest starts the costliest first (scripts/test keeps
#   ctest's own measurements too; COST orders the first run on a machine that has none).
function(fulcrum_test name)
  cmake_parse_arguments(ARG "CLUSTER" "LABEL;TIMEOUT;COST;SHARDS" "SOURCES;DEPS;ENVIRONMENT" ${ARGN})
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
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  if(ARG_LABEL STREQUAL "unit")
    set_property(GLOBAL APPEND PROPERTY FULCRUM_UNIT_TESTS ${name})
  endif()
  set(environment "FULCRUM_SOURCE_DIR=${PROJECT_SOURCE_DIR};FULCRUM_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(FULCRUM_SANITIZE)
    # cpprestsdk work still in flight at exit is not ours to free (the file says which).
    list(APPEND environment "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizer/lsan.supp")
  endif()
  if(ARG_SHARDS AND ARG_CLUSTER)
    message(FATAL_ERROR "fulcrum_test(${name}): SHARDS would start a cluster per shard")
  endif()
  if(NOT ARG_SHARDS)
    set(ARG_SHARDS 1)
  endif()
  math(EXPR last_shard "${ARG_SHARDS} - 1")
  foreach(shard RANGE ${last_shard})
    set(entry ${name})
    set(entry_environment ${environment} ${ARG_ENVIRONMENT})
    if(ARG_SHARDS GREATER 1)
      math(EXPR shard_number "${shard} + 1")
      set(entry ${name}_shard_${shard_number}of${ARG_SHARDS})
      list(APPEND entry_environment GTEST_TOTAL_SHARDS=${ARG_SHARDS} GTEST_SHARD_INDEX=${shard})
    endif()
    add_test(NAME ${entry} COMMAND ${name} --gtest_color=no)
    set_tests_properties(${entry} PROPERTIES LABELS "${ARG_LABEL}" TIMEOUT ${ARG_TIMEOUT}
      ENVIRONMENT "${entry_environment}")
    if(ARG_COST)
      set_tests_properties(${entry} PROPERTIES COST ${ARG_COST})
    endif()
  endforeach()
endfunction()
