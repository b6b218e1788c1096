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
