"""Builds flash_tutorial._C (the chapters' kernels) with the project's CMake during `pip install`.

    pip install --no-build-isolation ./python     # from the repository root

`--no-build-isolation` lets the build see the PyTorch already installed, which the extension is
compiled against. The kernels are built when that PyTorch has CUDA, a CUDA compiler (nvcc) and
CMake are found, and the repository is around python/ (FA_BUILD_KERNELS=auto, the default);
otherwise the package installs without them and the op runs its PyTorch reference, warning why.
FA_BUILD_KERNELS=1 makes a failed kernel build an error, FA_BUILD_KERNELS=0 skips it.
CMAKE_CUDA_ARCHITECTURES (e.g. 90) picks the GPUs to build for; the project's default otherwise.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the repository
BUILD = ROOT / "build-python"


def check_build_tools():
    """pip builds a wheel: setuptools before 70.1 needs the `wheel` package for that, and with
    --no-build-isolation pip installs nothing for the build (a fresh venv has setuptools 65 and no
    wheel). Say so, instead of pip's "invalid command 'bdist_wheel'"."""
    import setuptools
    try:
        version = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    except ValueError:
        return
    if version >= (70, 1):
        return
    try:
        import wheel  # noqa: F401
    except ImportError:
        sys.exit(f"flash_tutorial: setuptools {setuptools.__version__} in {sys.executable}'s environment needs the "
                 "`wheel` package to build a wheel, and --no-build-isolation installs nothing for the build: run "
                 "`pip install 'setuptools>=70.1'` (or `pip install wheel`) there first, then install again")


def kernels_unavailable():
    """Why the kernels cannot be built here, or None."""
    if not (ROOT / "CMakeLists.txt").is_file():
        return f"the repository is not around {HERE} (install from a clone of the repository)"
    try:
        import torch
    except ImportError as e:
        return (f"PyTorch is not importable by the build's Python, {sys.executable} ({e}): install it into that "
                "environment first and pass --no-build-isolation (a venv made with --system-site-packages from "
                "another venv's python does not see that venv's packages)")
    if torch.version.cuda is None:
        return f"PyTorch {torch.__version__} has no CUDA"
    if shutil.which("cmake") is None:
        return "cmake is not on PATH"
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        return "no CUDA compiler (nvcc) on PATH or in /usr/local/cuda/bin"
    return None


def build_kernels():
    env = dict(os.environ)
    if shutil.which("nvcc") is None:
        env["PATH"] = "/usr/local/cuda/bin" + os.pathsep + env.get("PATH", "")
    configure = ["cmake", "-S", str(ROOT), "-B", str(BUILD), "-DCMAKE_BUILD_TYPE=Release",
                 "-DFA_PYTHON_EXTENSION=ON", f"-DPython3_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    if os.environ.get("CMAKE_CUDA_ARCHITECTURES"):
        configure.append(f"-DCMAKE_CUDA_ARCHITECTURES={os.environ['CMAKE_CUDA_ARCHITECTURES']}")
    print("flash_tutorial: building the kernels:", " ".join(configure), flush=True)
    subprocess.run(configure, check=True, env=env)
    subprocess.run(["cmake", "--build", str(BUILD), "--target", "flash_tutorial_C", "-j", str(os.cpu_count() or 2)],
                   check=True, env=env)  # writes flash_tutorial/_C*.so (python/CMakeLists.txt)


class BuildPyWithKernels(build_py):
    def run(self):
        mode = os.environ.get("FA_BUILD_KERNELS", "auto")
        if mode != "0":
            reason = kernels_unavailable()
            if reason is None:
                try:
                    build_kernels()
                except subprocess.CalledProcessError as e:
                    if mode == "1":
                        raise
                    print(f"flash_tutorial: the kernel build failed ({e}); installing without them", flush=True)
            elif mode == "1":
                raise RuntimeError(f"flash_tutorial: FA_BUILD_KERNELS=1 but {reason}")
            else:
                print(f"flash_tutorial: installing without the kernels: {reason}", flush=True)
        super().run()


class WithCompiledCode(Distribution):
    """The wheel may carry _C*.so: tag it for this Python and platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


check_build_tools()
setup(cmdclass={"build_py": BuildPyWithKernels}, distclass=WithCompiledCode)
