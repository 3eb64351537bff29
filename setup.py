"""The build step of `pip install --no-build-isolation .` (pyproject.toml; docs/PYTHON.md, "Install").

setuptools only packs the wheel; CMake builds. build_ext configures this checkout (Release, tests
off, the Python package on, for the Python running pip), builds the extension module (target
ddpio_python) and the program (ddpio_cli), installs both into a staging folder and copies them into
the wheel beside the pure-Python files of python/ddpio:

    ddpio/*.py                          python/ddpio
    ddpio/_ddpio.cpython-3XX-*.so       the extension module
    ddpio/bin/ddpio                     the program, which `python -m ddpio` runs (ddpio/__main__.py)

Nothing is written into the checkout: the CMake build and setuptools' build/ and *.egg-info go to
a temporary folder, removed when the step ends. The environment may set:
  DDPIO_BUILD_DIR             a CMake build folder to use and keep (e.g. build/pip), so that the
                              next install rebuilds only what changed; default: the temporary one
  CMAKE_ARGS                  more CMake options, e.g. "-DDDPIO_WITH_CUDA=OFF"
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: every core)
"""
import atexit
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))

# setuptools' own scratch folders (build/, ddpio.egg-info) would land in the checkout.
SCRATCH = tempfile.mkdtemp(prefix="ddpio-setup-")
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def project_version():
    """The version defined once, in CMakeLists.txt's project() (as ddpio/version.h is)."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(\s*ddpio\s+VERSION\s+([0-9.]+)", f.read())
    if match is None:
        raise RuntimeError("CMakeLists.txt: no project(ddpio VERSION x.y.z)")
    return match.group(1)


def run(command):
    print("+ " + shlex.join(command), flush=True)
    subprocess.run(command, check=True)


class CMakeBuild(build_ext):
    """Builds the one extension, ddpio._ddpio, with CMake; the program comes with it."""

    def build_extension(self, ext):
        if self.inplace:
            raise RuntimeError("ddpio: in-place and editable builds are not supported; build with CMake "
                               "and use PYTHONPATH=<build>/python (docs/PYTHON.md)")
        build_dir = os.path.abspath(os.environ.get("DDPIO_BUILD_DIR") or os.path.join(SCRATCH, "cmake"))
        stage = os.path.join(SCRATCH, "stage")
        configure = ["cmake", "-S", ROOT, "-B", build_dir]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) and shutil.which("ninja"):
            configure += ["-G", "Ninja"]  # a kept build folder keeps the generator it was made with
        configure += ["-DCMAKE_BUILD_TYPE=Release", "-DDDPIO_BUILD_TESTS=OFF", "-DBUILD_TESTING=OFF",
                      "-DDDPIO_WITH_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}",
                      "-DDDPIO_PYTHON_INSTALL_DIR=python"]
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        run(configure)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        run(["cmake", "--build", build_dir, "-j", jobs, "--target", "ddpio_python", "ddpio_cli"])
        # cmake --install, not the build tree's files: the installed RPATHs name no build folder.
        # Component "python": the module and the .py files; the unnamed one: bin/ddpio (and the C++
        # library, headers and CMake package, which the wheel leaves out).
        shutil.rmtree(stage, ignore_errors=True)
        for component in ("python", "Unspecified"):
            run(["cmake", "--install", build_dir, "--prefix", stage, "--component", component])

        modules = glob.glob(os.path.join(stage, "python", "ddpio", "_ddpio*.so"))
        if len(modules) != 1:
            raise RuntimeError(f"ddpio: expected one extension module in {stage}/python/ddpio, found {modules}")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(modules[0], target)
        program = os.path.join(self.build_lib, "ddpio", "bin", "ddpio")
        os.makedirs(os.path.dirname(program), exist_ok=True)
        shutil.copy2(os.path.join(stage, "bin", "ddpio"), program)  # keeps the executable bit

    def get_outputs(self):
        return super().get_outputs() + [os.path.join(self.build_lib, "ddpio", "bin", "ddpio")]


setup(
    version=project_version(),
    ext_modules=[Extension("ddpio._ddpio", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": os.path.join(SCRATCH, "build")},
             "egg_info": {"egg_base": SCRATCH}},
)
