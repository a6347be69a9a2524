#!/usr/bin/env bash
# Run ON A GPU MACHINE (the device tool's), after scripts/gpu_prepare.sh here:
#   run(command="scripts/gpu_check.sh [STEPS]", carry=[".device"])
# Device time is scarce (minutes a session), so everything that does not need
# the machine's CUDA LibTorch was built here by gpu_prepare.sh (the plugins,
# the CUDA test binary, the quantize benchmark: .device/prebuilt.tar.xz). This
# script unpacks the carried .debs and that archive under /tmp, builds only
# altgrad-host there (ALTGRAD_CUDA=ON, against the LibTorch inside the
# machine's PyTorch) in the background, and meanwhile runs, each step logged
# into $OUT (or gpu-out/ when OUT is unset), summary.txt on stdout too:
#   test     the CUDA tests: the bundled plugins on GPU buffers against the
#            independent references
#   sanitize the CUDA tests under compute-sanitizer's memcheck (with leaks),
#            racecheck, synccheck and initcheck
#   bench    the quantize benchmark on the GPU (and one CPU core for scale)
#   train    configs/e5m2_short.toml on the GPU and on the CPU; a GPU run with
#            dropout resumed from a checkpoint against the same run whole
#   recipes  each recipe of configs/recipes/ for 50 steps on the GPU (what
#            runs there, and what is refused with which error)
# STEPS defaults to "test sanitize bench train recipes". Every command has a time limit,
# so that what finished comes back even when one hangs.
set -uo pipefail
cd "$(dirname "$0")/.."
steps="${1:-test sanitize bench train recipes}"
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out/logs"
prefix=/tmp/altgrad-deps
t0=$SECONDS
log() { echo "gpu_check [$((SECONDS - t0))s]: $*" | tee -a "$out/summary.txt"; }
finish() { tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$out/logs"; }
trap finish EXIT

# ---- dependencies and the prebuilt binaries
[[ -f .device/prebuilt.tar.xz ]] || { log "no .device/prebuilt.tar.xz: run scripts/gpu_prepare.sh here first"; exit 1; }
mkdir -p "$prefix"
for deb in .device/debs/*.deb; do dpkg -x "$deb" "$prefix" || { log "cannot unpack $deb"; exit 1; }; done
tar -C /tmp -xJf .device/prebuilt.tar.xz || { log "cannot unpack .device/prebuilt.tar.xz"; exit 1; }
pre=/tmp/prebuilt
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
compiled_dir="$(cat $pre/plugin_dir.txt)"
[[ -e "$compiled_dir" ]] || { mkdir -p "$(dirname "$compiled_dir")" && ln -s "$pre/plugins" "$compiled_dir"; }
corpus="$prefix/usr/share/games/fortunes"
# The configs read the default corpus at its Debian path.
[[ -e /usr/share/games/fortunes ]] || { mkdir -p /usr/share/games && ln -s "$corpus" /usr/share/games/fortunes; }
log "prebuilt at $(cat $pre/commit.txt), this tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$out/summary.txt"
log "nvcc: $(nvcc --version | tail -1); $(g++ --version | head -1); $(cmake --version | head -1)"
torch_prefix="${TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}" \
  || { log "no PyTorch (set TORCH_PREFIX to a LibTorch's cmake folder)"; exit 1; }
log "torch $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null) at $torch_prefix"

# ---- the host, in the background, when a step trains
build_pid=
if [[ " $steps " == *" train "* || " $steps " == *" recipes "* ]]; then
  generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
  (
    cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DALTGRAD_CUDA=ON \
      -DALTGRAD_BUILD_TESTS=OFF -DALTGRAD_BUILD_BENCHMARKS=OFF -DALTGRAD_PYTHON=OFF \
      -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_prefix" -DBoost_ROOT="$prefix/usr" > "$out/logs/configure.log" 2>&1 &&
      timeout 420 cmake --build build-gpu -j "$(nproc)" --target altgrad-host > "$out/logs/build.log" 2>&1
  ) &
  build_pid=$!
fi
host_ready() {
  wait "$build_pid"; local rc=$?
  if ((rc == 0)); then
    # PyTorch's wheels carry their own std::filesystem (util/file_tree.hpp says why that matters).
    log "host built; libtorch_cpu exports" \
      "$(nm -D --defined-only "$(dirname "$torch_prefix")/../lib/libtorch_cpu.so" 2>/dev/null | grep -c _ZNSt10filesystem)" \
      "std::filesystem symbols"
    return 0
  fi
  log "host build FAILED (exit $rc)"
  grep -h -m8 -A4 -E "error|Error" "$out/logs/configure.log" "$out/logs/build.log" 2>/dev/null | head -30 | tee -a "$out/summary.txt"
  return 1
}
run_host() {  # NAME DEVICE CONFIG [--set ...]: one run, its last lines in the summary
  local name="$1" device="$2" config="$3"; shift 3
  rm -rf "/tmp/run-$name"
  local start=$SECONDS
  timeout 240 build-gpu/altgrad-host --plugins "$pre/plugins" run "$config" --out "/tmp/run-$name" \
    --set training.device="$device" --set data.path="$corpus" "$@" > "$out/logs/run_$name.log" 2>&1
  local rc=$?
  log "run $name ($device) exit $rc in $((SECONDS - start))s: $(grep -E '^(done|error|altgrad-host)' "$out/logs/run_$name.log" | tail -1)"
  [[ -f "/tmp/run-$name/summary.json" ]] && cp "/tmp/run-$name/summary.json" "$out/logs/summary_$name.json"
  return $rc
}

host_ok=
for step in $steps; do
  case "$step" in
    test)
      timeout 300 "$pre/altgrad_cuda_tests" --gtest_brief=1 > "$out/logs/cuda_tests.log" 2>&1
      log "cuda tests exit $?: $(grep -E '^\[  PASSED  \]|FAILED TESTS|tests? ran' "$out/logs/cuda_tests.log" | tr '\n' ' ')"
      grep -E "^\[  FAILED  \]" "$out/logs/cuda_tests.log" | head -20 | tee -a "$out/summary.txt" ;;
    sanitize)
      sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
      for tool in memcheck racecheck synccheck initcheck; do
        extra=(); [[ $tool == memcheck ]] && extra=(--leak-check full)
        timeout 180 "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 9 "$pre/altgrad_cuda_tests" \
          --gtest_brief=1 > "$out/logs/$tool.log" 2>&1
        log "compute-sanitizer $tool exit $?: $(grep -hE 'SUMMARY' "$out/logs/$tool.log" | sed 's/=* *//' | tr '\n' ' ')$(grep -E '^\[  (PASSED|FAILED)  \]' "$out/logs/$tool.log" | head -2 | tr '\n' ' ')"
      done ;;
    bench)
      timeout 240 "$pre/altgrad_quantize_bench" --altgrad_plugin_dir="$pre/plugins" \
        --benchmark_filter='^cuda_(copy|quantize/(e5m2|e4m3|fp4_e2m1|bf16)/)|^quantize/(e5m2|e4m3|fp4_e2m1|bf16)/nearest_even/16MiB' \
        --benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        > "$out/logs/quantize_bench.txt" 2>&1
      log "quantize bench exit $?"
      grep -E "_median" "$out/logs/quantize_bench.txt" | tee -a "$out/summary.txt" ;;
    train)
      [[ -n "$host_ok" ]] || { host_ready && host_ok=1; } || continue
      run_host e5m2-cuda cuda configs/e5m2_short.toml
      run_host e5m2-cpu cpu configs/e5m2_short.toml
      # Resume on the GPU with dropout: 40 steps whole, then the same run resumed
      # from its step-20 checkpoint; the metrics (less tokens_per_s) must agree.
      run_host resume-whole cuda configs/e5m2_short.toml --set training.max_steps=40 \
        --set training.warmup_steps=5 --set model.dropout=0.1 --set output.checkpoint_interval=20 \
        --set output.keep_checkpoints=5
      [[ -d /tmp/run-resume-whole/checkpoints/step_0000020 ]] || { log "resume: no step-20 checkpoint, nothing compared"; continue; }
      rm -rf /tmp/run-resume-cut && cp -r /tmp/run-resume-whole /tmp/run-resume-cut &&
        rm -rf /tmp/run-resume-cut/checkpoints/step_0000040
      timeout 120 build-gpu/altgrad-host --plugins "$pre/plugins" run --resume /tmp/run-resume-cut \
        > "$out/logs/run_resume-cut.log" 2>&1
      log "resumed run exit $?: $(grep -E '^(done|error)' "$out/logs/run_resume-cut.log" | tail -1)"
      if [[ -s /tmp/run-resume-whole/metrics.jsonl ]] &&
         diff <(sed 's/"tokens_per_s":[^,}]*,\{0,1\}//' /tmp/run-resume-whole/metrics.jsonl) \
              <(sed 's/"tokens_per_s":[^,}]*,\{0,1\}//' /tmp/run-resume-cut/metrics.jsonl) > "$out/logs/resume_diff.txt"; then
        log "resume on cuda with dropout: metrics equal"
      else
        log "resume on cuda with dropout: metrics DIFFER (logs/resume_diff.txt)"
      fi ;;
    recipes)
      [[ -n "$host_ok" ]] || { host_ready && host_ok=1; } || continue
      short=(--set training.max_steps=50 --set training.warmup_steps=5 --set training.eval_interval=50)
      for recipe in te_delayed te_current te_mxfp8 nvfp4 tseng_mxfp4 deepseek_v3; do
        run_host "$recipe" cuda "configs/recipes/$recipe.toml" "${short[@]}"
      done
      # The transforms and the accumulator model run on the CPU only: the NVFP4
      # recipe without its Hadamard transform, DeepSeek-V3's with float32 sums.
      run_host nvfp4-no_rht cuda configs/recipes/nvfp4.toml "${short[@]}" \
        --set quantization.weight_gradient.transform=none
      run_host deepseek_v3-fp32_sums cuda configs/recipes/deepseek_v3.toml "${short[@]}" \
        --set quantization.forward.accumulator=none --set quantization.input_gradient.accumulator=none \
        --set quantization.weight_gradient.accumulator=none ;;
    *) log "unknown step $step" ;;
  esac
done
log "done"
