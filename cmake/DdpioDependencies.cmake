# Every third-party dependency, found once. scripts/install-deps.sh installs them.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(libjpeg-turbo CONFIG REQUIRED)
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
# ddpio convert: PNG, WebP, BMP, TIFF, PPM/PGM decoding (convert/image_decode.h)
pkg_check_modules(GraphicsMagick REQUIRED IMPORTED_TARGET GraphicsMagick)
# ddpio convert --from jsonl: text tokenized with SentencePiece (convert/token_sources.h)
pkg_check_modules(SentencePiece REQUIRED IMPORTED_TARGET sentencepiece)
find_package(nlohmann_json 3 CONFIG REQUIRED)
# Object stores (storage/s3/): libcurl signs S3 requests itself (CURLOPT_AWS_SIGV4, >= 7.75).
find_package(CURL 7.75 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)

# CRC32C (record checksums): Intel ISA-L, chosen by benchmark (docs/PERFORMANCE.md).
find_path(ISAL_INCLUDE_DIR isa-l/crc.h REQUIRED)
find_library(ISAL_LIBRARY isal REQUIRED)
if(NOT TARGET ddpio_isal)
  add_library(ddpio_isal INTERFACE)
  target_include_directories(ddpio_isal INTERFACE ${ISAL_INCLUDE_DIR})
  target_link_libraries(ddpio_isal INTERFACE ${ISAL_LIBRARY})
endif()

# --- CUDA and NCCL: optional, AUTO by default. Only their headers are used at build time: ddpio
# opens libcudart, libcublas and libnccl when a GPU path is first taken (device/lazy_library.h),
# so no program or library of ddpio links them, and a CPU-only process never loads them. Never
# the driver stub libcuda: the runtime opens the driver itself.
set(DDPIO_HAVE_CUDA OFF)
set(DDPIO_HAVE_NCCL OFF)
if(NOT DDPIO_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND DEFINED ENV{CUDA_HOME})
    set(CUDAToolkit_ROOT $ENV{CUDA_HOME})
  endif()
  if(DDPIO_WITH_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    set(DDPIO_HAVE_CUDA ON)
  endif()
endif()
if(DDPIO_HAVE_CUDA AND NOT DDPIO_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(DDPIO_HAVE_NCCL ON)
    if(NOT TARGET ddpio_nccl_lib)
      add_library(ddpio_nccl_lib INTERFACE)  # the header only: libnccl is opened on first use
      target_include_directories(ddpio_nccl_lib INTERFACE $<BUILD_INTERFACE:${NCCL_INCLUDE_DIR}>)
    endif()
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_major REGEX "^#define NCCL_MAJOR ")
    string(REGEX REPLACE "^#define NCCL_MAJOR +([0-9]+).*" "\\1" DDPIO_NCCL_MAJOR "${_nccl_major}")
    get_filename_component(DDPIO_NCCL_LIBDIR ${NCCL_LIBRARY} DIRECTORY)
  elseif(DDPIO_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "DDPIO_WITH_NCCL=ON but nccl.h / libnccl were not found (set NCCL_HOME)")
  endif()
elseif(DDPIO_WITH_NCCL STREQUAL "ON")
  message(FATAL_ERROR "DDPIO_WITH_NCCL=ON needs the CUDA toolkit (DDPIO_WITH_CUDA)")
endif()
# The device trainer's kernels (ddpio/trainer/device_kernels.cu) are compiled by the toolkit's
# nvcc; with nvcc and cuBLAS the model can live on the device (DDPIO_HAVE_DEVICE_MODEL). Real
# architectures from Turing on, plus Hopper's PTX for newer GPUs to compile at load time.
set(DDPIO_HAVE_DEVICE_MODEL OFF)
if(DDPIO_HAVE_CUDA AND TARGET CUDA::cublas AND CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 75-real 80-real 86-real 90)
  endif()
  if(DDPIO_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${DDPIO_CCACHE})
  endif()
  enable_language(CUDA)
  set(DDPIO_HAVE_DEVICE_MODEL ON)
endif()
message(STATUS "ddpio: CUDA ${DDPIO_HAVE_CUDA}, NCCL ${DDPIO_HAVE_NCCL}, device model ${DDPIO_HAVE_DEVICE_MODEL}")

# The NCCL stand-in tests (tests/gpu_standin) need only the headers nccl.h and
# cuda_runtime_api.h, not the libraries: found even when DDPIO_WITH_CUDA/NCCL are OFF, so the
# NCCL backend's logic is tested in every preset that has the headers.
find_path(DDPIO_NCCL_HEADERS nccl.h
          HINTS ${NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include $ENV{CUDA_HOME}/include
                /usr/local/cuda/include)
find_path(DDPIO_CUDART_HEADERS cuda_runtime_api.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include /usr/local/cuda/include)
find_path(DDPIO_CUBLAS_HEADERS cublas_v2.h
          HINTS ${DDPIO_CUDART_HEADERS} ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include /usr/local/cuda/include)
if(DDPIO_NCCL_HEADERS AND DDPIO_CUDART_HEADERS)
  set(DDPIO_HAVE_NCCL_HEADERS ON)
else()
  set(DDPIO_HAVE_NCCL_HEADERS OFF)
endif()
message(STATUS "ddpio: NCCL stand-in tests ${DDPIO_HAVE_NCCL_HEADERS}")

# PyTorch, for the interoperability tests (sampler parity, torchrun, TCPStore). The Debian
# package python3-torch (scripts/install-deps.sh) provides it for /usr/bin/python3.
set(DDPIO_TORCH_PYTHON "")
foreach(_py /usr/bin/python3)
  execute_process(COMMAND ${_py} -c "import torch.distributed.run" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
  if(_rc EQUAL 0)
    set(DDPIO_TORCH_PYTHON ${_py})
    break()
  endif()
endforeach()
if(DDPIO_TORCH_PYTHON)
  message(STATUS "ddpio: PyTorch for interoperability tests: ${DDPIO_TORCH_PYTHON}")
else()
  message(WARNING "python3-torch not found: the torchrun / TCPStore interoperability tests are not built (scripts/install-deps.sh installs it)")
endif()
