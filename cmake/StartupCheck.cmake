# ctest script: the ddpio program and Python module load no GPU or BLAS library at start. They
# open libcudart, libcublas, libnccl and libopenblas on first use (ddpio/device/lazy_library.h),
# so a CPU-only rank starts fast and small; a link to any of them (a stray
# target_link_libraries) would make every process of every job map them.
# Inputs: FILES (comma-separated programs and modules), PROGRAM (run with --version).
set(forbidden "libcudart|libcublas|libnccl|libopenblas|libcuda\\.")
string(REPLACE "," ";" FILES "${FILES}")
foreach(file ${FILES})
  execute_process(COMMAND ldd ${file} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ldd ${file} failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]*(${forbidden})[^\n]*" found "${out}")
  if(found)
    message(FATAL_ERROR "${file} links a library it should open on first use:\n${found}")
  endif()
  string(REGEX MATCHALL "\n" lines "${out}")
  list(LENGTH lines n)
  message(STATUS "${file}: ${n} libraries, none of ${forbidden}")
endforeach()
execute_process(COMMAND ${PROGRAM} --version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^ddpio [0-9]")
  message(FATAL_ERROR "${PROGRAM} --version failed (${rc}): ${out}")
endif()
