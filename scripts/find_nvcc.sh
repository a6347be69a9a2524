# Sourced by the scripts that compile with nvcc (cuda_compile_check.sh,
# gpu_prepare.sh): one rule for where nvcc is.
# find_nvcc: sets $nvcc to $CUDACXX, else nvcc on PATH, else
# ${CUDA_HOME:-/usr/local/cuda}/bin/nvcc, and returns 0 when it is a program;
# 1 when CUDACXX is unset and there is none ($nvcc then names the last place
# looked); 2 when CUDACXX names no program.
find_nvcc() {
  if [[ -n "${CUDACXX:-}" ]]; then
    nvcc="$CUDACXX"
    [[ -x "$nvcc" ]] || return 2
    return 0
  fi
  nvcc="$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")"
  [[ -x "$nvcc" ]]
}
