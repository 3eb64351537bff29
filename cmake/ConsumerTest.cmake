# ctest script: the consumer example built against ddpio as users get it — installed with
# `cmake --install`, and from the .deb (`cpack -G DEB`, extracted with dpkg -x into a scratch
# root) — then run as a 2-rank job under `ddpio launch` on a small synthetic dataset: each rank
# reports its images, which must add up to the dataset (63: odd, so one rank's last sample is the
# sampler's padding, which the consumer must not count).
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, DDPIO_BIN.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

function(consumer_against prefix name)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build-${name} -G Ninja
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build-${name})
  run(${DDPIO_BIN} launch --nproc-per-node 2 -- ${WORK_DIR}/build-${name}/consumer ${WORK_DIR}/db 2)
  message(STATUS "${name}: ${LAST_OUTPUT}")
  string(REGEX MATCHALL "consumer rank [01]: ([0-9]+) images" lines "${LAST_OUTPUT}")
  list(LENGTH lines n)
  set(total 0)
  foreach(l ${lines})
    string(REGEX REPLACE ".*: ([0-9]+) images" "\\1" count "${l}")
    math(EXPR total "${total} + ${count}")
  endforeach()
  if(NOT n EQUAL 2 OR NOT total EQUAL 63)
    message(FATAL_ERROR "${name}: expected 2 ranks with 63 images in all, got:\n${LAST_OUTPUT}")
  endif()
endfunction()

# The Python package from the same tree, with nothing of the build on its path: it imports, reads
# the dataset, and `python3 -m ddpio` finds the program installed beside it. (No ';' in the
# Python code: CMake would split the argument there.)
function(python_against prefix name)
  if(NOT PYTHON)
    return()
  endif()
  set(env ${CMAKE_COMMAND} -E env --unset=DDPIO_PROGRAM PYTHONPATH=${prefix}/${PYTHON_DIR} PATH=/usr/bin:/bin)
  run(${env} ${PYTHON} -c "import ddpio\nd = ddpio.Dataset('${WORK_DIR}/db')\nprint('python', ddpio.__version__, len(d), d.__class__.__module__, ddpio.__file__)")
  message(STATUS "${name}: ${LAST_OUTPUT}")
  if(NOT LAST_OUTPUT MATCHES "python [0-9.]+ 63 ddpio.dataset ${prefix}/")
    message(FATAL_ERROR "${name}: the installed Python package did not read the dataset:\n${LAST_OUTPUT}")
  endif()
  run(${env} ${PYTHON} -m ddpio inspect ${WORK_DIR}/db)
  if(NOT LAST_OUTPUT MATCHES "records +63 ")
    message(FATAL_ERROR "${name}: python3 -m ddpio inspect:\n${LAST_OUTPUT}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${DDPIO_BIN} synth --out ${WORK_DIR}/src --classes 3 --per-class 21 --size 32 --quiet)
run(${DDPIO_BIN} convert --src ${WORK_DIR}/src --out ${WORK_DIR}/db --quiet)

# Sealed where installed: no internal/ header, and no installed header includes one (a program
# built against the install would not compile), nor the HTTP client under pipeline.h.
function(check_sealed include_dir)
  file(GLOB_RECURSE internal ${include_dir}/ddpio/*)
  list(FILTER internal INCLUDE REGEX "/internal/")
  if(internal)
    message(FATAL_ERROR "installed internal headers: ${internal}")
  endif()
  file(GLOB_RECURSE headers ${include_dir}/ddpio/*.h)
  list(LENGTH headers n)
  if(n LESS 20)
    message(FATAL_ERROR "only ${n} installed headers under ${include_dir}: this checks nothing")
  endif()
  foreach(h ${headers})
    file(STRINGS ${h} bad REGEX "#include \"ddpio/.*/internal/")
    if(bad)
      message(FATAL_ERROR "${h} includes an internal header: ${bad}")
    endif()
  endforeach()
  message(STATUS "${n} installed headers, none internal or including one")
endfunction()

# 1. cmake --install
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
check_sealed(${WORK_DIR}/prefix/include)
consumer_against(${WORK_DIR}/prefix installed)
python_against(${WORK_DIR}/prefix installed)

# 2. the Debian package
run(${CMAKE_COMMAND} -E chdir ${BUILD_DIR} cpack -G DEB -B ${WORK_DIR}/deb)
file(GLOB debs ${WORK_DIR}/deb/*.deb)
list(LENGTH debs ndebs)
if(NOT ndebs EQUAL 1)
  message(FATAL_ERROR "cpack made ${ndebs} packages: ${debs}")
endif()
run(dpkg-deb --info ${debs})
message(STATUS "package: ${debs}\n${LAST_OUTPUT}")
run(dpkg -x ${debs} ${WORK_DIR}/root)
consumer_against(${WORK_DIR}/root/usr deb)
python_against(${WORK_DIR}/root/usr deb)
file(REMOVE_RECURSE ${WORK_DIR})
