# ctest script: install ddpio into a scratch prefix, build examples/consumer against the
# installed package, and run it on a small synthetic dataset.
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, DDPIO_BIN.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${DDPIO_BIN} synth --out ${WORK_DIR}/src --classes 3 --per-class 20 --size 32 --quiet)
run(${DDPIO_BIN} convert --src ${WORK_DIR}/src --out ${WORK_DIR}/db --quiet)
run(${WORK_DIR}/build/consumer ${WORK_DIR}/db)
message(STATUS "${LAST_OUTPUT}")
if(NOT LAST_OUTPUT MATCHES "consumer: 60 records, 3 classes")
  message(FATAL_ERROR "unexpected consumer output: ${LAST_OUTPUT}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
