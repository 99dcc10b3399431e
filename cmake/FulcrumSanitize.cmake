# FULCRUM_SANITIZE=ON: every target of the build with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang only), plus the libFuzzer targets in tests/fuzz.
# Code is also instrumented for libFuzzer's coverage (fuzzer-no-link) so that a fuzz
# target is guided by the libraries it calls, not only by its own file; without the
# libFuzzer runtime (the unit tests) the ASan runtime supplies the no-op callbacks.
# UB is fatal (-fno-sanitize-recover): a test or fuzz run must fail on it, not print.
if(NOT FULCRUM_SANITIZE)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "FULCRUM_SANITIZE needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
endif()
# vptr is left out: it flags calls through cpprest's inline headers on objects whose type
# information lives in the uninstrumented libcpprest.so (a false positive in every REST test).
add_compile_options(-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined
                    -fno-sanitize=vptr -fno-omit-frame-pointer)
# -O1 and line tables only: what ASan's reports need, and less compile time than the
# build type's -O2 -g (this build is part of every CI run); these come after the build type's.
add_compile_options(-O1 -gline-tables-only)
add_link_options(-fsanitize=address,undefined)
# Our structs rely on default member initializers when aggregate initialization leaves trailing
# fields out; gcc's -Wextra accepts that, clang's flags it. Not a defect, so not an error here.
add_compile_options(-Wno-missing-field-initializers)
message(STATUS "Fulcrum: ASan + UBSan build with libFuzzer targets (tests/fuzz)")
