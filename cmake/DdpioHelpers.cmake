# Warnings and sanitizers for every ddpio target.
add_library(ddpio_build_flags INTERFACE)
target_compile_options(ddpio_build_flags INTERFACE -Wall -Wextra -Wno-missing-field-initializers)
if(DDPIO_WERROR)
  target_compile_options(ddpio_build_flags INTERFACE -Werror)
endif()
if(DDPIO_SANITIZE)
  target_compile_options(ddpio_build_flags INTERFACE -fsanitize=${DDPIO_SANITIZE} -fno-omit-frame-pointer
                                                     -fno-sanitize-recover=all)
  target_link_options(ddpio_build_flags INTERFACE -fsanitize=${DDPIO_SANITIZE})
endif()
if(DDPIO_FUZZ)
  # Coverage feedback for libFuzzer in every ddpio library; the targets link -fsanitize=fuzzer.
  target_compile_options(ddpio_build_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()
install(TARGETS ddpio_build_flags EXPORT ddpioTargets)

# Unity builds for the program's targets (the libraries, tools/): each batch of 8 files is compiled
# as one, so the JSON, Abseil and CLI11 templates are instantiated and optimized once per batch,
# not once per file. On a 2-core machine this halves a cold build of `ddpio`: scripts/demo.sh (the
# newcomer's first build) turns it on. Off by default, so that an edit rebuilds its own file and
# the tests, sanitizers and fuzzers (scripts/test.sh, CI) build file by file.
option(DDPIO_UNITY_BUILD "Compile the program's targets in unity batches" OFF)
function(ddpio_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${DDPIO_UNITY_BUILD})
endfunction()

# ddpio_module(NAME SOURCES ... DEPS ...): a static library ddpio_NAME, alias ddpio::NAME,
# with the repository root as its public include directory.
function(ddpio_module name)
  cmake_parse_arguments(M "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(ddpio_${name} ${M_SOURCES})
  add_library(ddpio::${name} ALIAS ddpio_${name})
  set_target_properties(ddpio_${name} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(ddpio_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  # BUILD_SHARED_LIBS=ON builds shared libraries: one SONAME per minor version while below 1.0.
  # Installed, each finds the modules it links beside itself, whatever the prefix.
  set_target_properties(ddpio_${name} PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
                        OUTPUT_NAME ddpio_${name} INSTALL_RPATH "$ORIGIN")
  target_link_libraries(ddpio_${name} PUBLIC ${M_PUBLIC_DEPS} PRIVATE ddpio_build_flags ${M_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY DDPIO_INSTALLED_MODULES ddpio_${name})
  ddpio_unity(ddpio_${name})
endfunction()

# ddpio_test(NAME SOURCES ... DEPS ...): a GoogleTest binary registered with CTest.
function(ddpio_test name)
  if(NOT (BUILD_TESTING AND DDPIO_BUILD_TESTS))
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} ddpio_testing GTest::gmock GTest::gtest_main
                                        ddpio_build_flags)
  set(_labels)
  if(T_LABELS)
    set(_labels LABELS ${T_LABELS})
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT} ${_labels}
                       ENVIRONMENT "DDPIO_BIN=$<TARGET_FILE:ddpio_cli>")
endfunction()
