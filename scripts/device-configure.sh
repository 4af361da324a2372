# Sourced by the scripts that run ON the GPU machine (gpu-check.sh, hardening-device.sh,
# two-gpu-check.sh), from the repository root with .devdeps/ carried:
#   configure_device_build BUILD_DIR LOG_FILE [more CMake arguments...]
# configures a release tree with the system g++ (a Python extension built with the machine's
# other g++ crashed next to torch), the header-only dependencies and GoogleTest of .devdeps/, and
# the headers of the pip package nvidia-cudnn (there is no cudnn.h under /usr/local/cuda there).
# PY names the Python (default python3).
configure_device_build() {
  local build=$1 log=$2
  shift 2
  local root site
  root=$(pwd)
  site=$("${PY:-python3}" -c "import site;print(site.getsitepackages()[0])")
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_C_COMPILER=/usr/bin/gcc \
    -DDNNGRAPH_EXTRA_INCLUDE_DIR="$root/.devdeps" -DDNNGRAPH_GTEST_SOURCE_DIR="$root/.devdeps/googletest" \
    -DCUDNN_INCLUDE_DIR="$site/nvidia/cudnn/include" -DDNNGRAPH_CUDNN_INCLUDE_DIR="$site/nvidia/cudnn/include" \
    -DDNNGRAPH_CUDA=ON -DDNNGRAPH_BUILD_TOOLS=OFF -DDNNGRAPH_BUILD_PYTHON=ON \
    -DPython_EXECUTABLE="$(command -v "${PY:-python3}")" "$@" >"$log" 2>&1
}

# run_logged NAME TIMEOUT COMMAND...: runs COMMAND under `timeout` with its output in
# $out/NAME.log, keeps its exit status in result[NAME] (an associative array of the caller) and
# prints it with the seconds taken.
run_logged() {
  local name=$1 t=$2
  shift 2
  local s
  s=$(date +%s)
  timeout "$t" "$@" >"$out/$name.log" 2>&1
  result[$name]=$?
  echo "$name: rc=${result[$name]} ($(($(date +%s) - s)) s)"
}
