# ctest script: what a public header pulls in. A trainer that includes ddpio/pipeline/pipeline.h
# should not compile the object store's HTTP client (nor libcurl's headers) into every file that
# includes it: that client is the storage module's own business.
# Inputs: COMPILER, SOURCE_DIR, BINARY_DIR, HEADER (relative to SOURCE_DIR), FORBIDDEN (a regex).
execute_process(
  COMMAND ${COMPILER} -std=c++20 -M -x c++ -I${SOURCE_DIR} -I${BINARY_DIR}/include ${SOURCE_DIR}/${HEADER}
  OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${HEADER} does not compile on its own (${rc}):\n${err}")
endif()
string(REGEX MATCHALL "[^ \n\\\\]*ddpio/[^ \n\\\\]*\\.h" ours "${deps}")
list(LENGTH ours n)
if(n LESS 5)
  message(FATAL_ERROR "${HEADER} includes only ${n} ddpio headers: this checks nothing")
endif()
string(REGEX MATCHALL "[^ \n\\\\]*(${FORBIDDEN})[^ \n\\\\]*" found "${deps}")
if(found)
  message(FATAL_ERROR "${HEADER} includes ${found}")
endif()
message(STATUS "${HEADER}: ${n} ddpio headers, none matching ${FORBIDDEN}")
