# `cpack -G DEB` (run in the build directory) makes one Debian package holding the libraries,
# the public headers, the CMake package and the `ddpio` program:
#   ddpio_<version>_<arch>.deb
# Depends: the runtime packages of the shared libraries the program and libraries link,
# computed by dpkg-shlibdeps. Libraries no Debian package provides (the CUDA runtime and NCCL of a
# CUDA build) are not listed: a build with CUDA expects them where the CUDA toolkit put them; for a
# package that runs anywhere, configure with -DDDPIO_WITH_CUDA=OFF (the program opens those
# libraries on first use, so it starts without them either way). OpenBLAS, opened by the trainer's
# CPU engine on first use and so invisible to dpkg-shlibdeps, is listed by hand.
# Recommends: the -dev packages that find_package(ddpio) needs to build a program against it.
# With the Python package built (DDPIO_WITH_PYTHON), it is in the package too, for the Python it
# was built with (lib/python3.X/dist-packages); Suggests: that Python, numpy and torch.
set(CPACK_PACKAGE_NAME ddpio)
set(CPACK_PACKAGE_VENDOR "ddpio")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "data loading for multi-node deep-learning training: sampler, LMDB loader, group feeding")
set(CPACK_PACKAGE_DESCRIPTION
    "ddpio reads image datasets from LMDB with a torch-exact distributed sampler, decodes and\
 batches them in prefetching loaders, and lets one leader rank per group read for its peers,\
 sending over Gloo (CPU) or NCCL (GPU). Includes the ddpio program (convert, inspect, bench,\
 launch, train) and the C++ library with its CMake package (find_package(ddpio)).")
set(CPACK_PACKAGE_CONTACT "ddpio developers <ddpio@localhost>")
set(CPACK_PACKAGE_INSTALL_DIRECTORY ddpio)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "cmake, pkg-config, liblmdb-dev, libabsl-dev, libturbojpeg0-dev, libjpeg62-turbo-dev, libisal-dev, nlohmann-json3-dev, libgloo-dev, libopenblas-dev, libgraphicsmagick1-dev")
if(TARGET ddpio_python)
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS
      "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}.99), python3-numpy, python3-torch")
endif()
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
include(CPack)
