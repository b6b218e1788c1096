#!/usr/bin/env bash
# Optional: the libraries bench/anchors compares Sol against (oneDNN 2.6 and OpenBLAS 0.3.21 on
# Debian 12; libdnnl-dev's CMake config also needs the OpenCL headers it recommends). Not needed
# to build or test Sol, and CI does not install them. Run as root.
set -euo pipefail
apt-get install -y libdnnl-dev libopenblas-dev ||
  { apt-get update && apt-get install -y libdnnl-dev libopenblas-dev; }
