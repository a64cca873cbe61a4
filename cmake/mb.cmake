# Module helpers: one directory, one library, one job (docs/style.md).

add_library(mb_warnings INTERFACE)
target_compile_options(mb_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
  -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual
  $<$<BOOL:${MB_WERROR}>:-Werror>)

# mb_module(NAME engine SRCS a.cc b.cc DEPS mb::common PUBLIC_LIBS ...)
# creates mb_<name> with alias mb::<name>; includes are rooted at src/.
function(mb_module)
  cmake_parse_arguments(M "" "NAME" "SRCS;DEPS" ${ARGN})
  set(target mb_${M_NAME})
  if(M_SRCS)
    add_library(${target} STATIC ${M_SRCS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${M_DEPS} PRIVATE mb_warnings)
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} INTERFACE ${M_DEPS})
  endif()
  add_library(mb::${M_NAME} ALIAS ${target})
endfunction()

# mb_test(NAME engine_order_book SRCS x_test.cc DEPS mb::engine LABEL engine)
# registers one gtest binary with CTest; `ctest -L <label>` runs a module's tests.
function(mb_test)
  cmake_parse_arguments(T "" "NAME;LABEL" "SRCS;DEPS" ${ARGN})
  if(NOT MB_BUILD_TESTS)
    return()
  endif()
  add_executable(${T_NAME}_test ${T_SRCS})
  # Test-only helpers live in tests/support/ ("support/engine_test_support.h").
  target_include_directories(${T_NAME}_test PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${T_NAME}_test PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main mb_warnings)
  target_compile_definitions(${T_NAME}_test PRIVATE
    MB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Options for the test's own sources only (the libraries it tests keep the
  # build's flags): the asan preset compiles test code without UBSan and
  # unoptimised, which halves its compile time, while the code under test
  # keeps both sanitizers.
  target_compile_options(${T_NAME}_test PRIVATE ${MB_TEST_COMPILE_OPTIONS})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME}_test)
  # Every unit-test binary also carries the label "unit" (scripts/test.sh: the
  # release phase leaves these to the asan phase).
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABEL};unit" TIMEOUT 900)
endfunction()
