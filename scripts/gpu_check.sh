#!/usr/bin/env bash
# Run ON A GPU MACHINE (the device tool's), after scripts/gpu_prepare.sh here:
#   run(command="scripts/gpu_check.sh [STEPS]", carry=[".device"])
# It unpacks the carried .debs into a prefix of their own (not /), finds the
# LibTorch 2.x (CUDA) inside the machine's PyTorch, builds AltGrad with
# ALTGRAD_CUDA=ON into build-gpu/, and then, each step logged into $OUT (or
# gpu-out/ when OUT is unset):
#   test     the whole CTest suite, the CUDA tests (label cuda) included
#   bench    the quantize benchmark on the CPU and on the GPU
#   train    configs/e5m2_short.toml on the GPU, and the CPU for comparison; a GPU
#            run with dropout resumed from a checkpoint against the same run whole
# STEPS defaults to "test bench train".
set -uo pipefail
cd "$(dirname "$0")/.."
steps="${1:-test bench train}"
out="${OUT:-$PWD/gpu-out}"
mkdir -p "$out"
prefix=/tmp/altgrad-deps
log() { echo "gpu_check: $*" | tee -a "$out/summary.txt"; }

# ---- dependencies
mkdir -p "$prefix"
for deb in .device/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
torch_prefix="${TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}" \
  || { log "no PyTorch (set TORCH_PREFIX to a LibTorch's cmake folder)"; exit 1; }
log "torch $(python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
log "nvcc $(nvcc --version | tail -1)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu /' | tee -a "$out/summary.txt"

# ---- build
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DALTGRAD_CUDA=ON \
  -DCMAKE_PREFIX_PATH="$prefix/usr;$torch_prefix" -DBoost_ROOT="$prefix/usr" \
  > "$out/configure.log" 2>&1 || { log "configure failed"; tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j "$(nproc)" > "$out/build.log" 2>&1 || {
  log "build failed"; grep -m20 -B2 -A8 "error" "$out/build.log"; exit 1; }
log "build ok"
corpus="$prefix/usr/share/games/fortunes"
# The tests and configs read the default corpus at its Debian path.
[ -e /usr/share/games/fortunes ] || { mkdir -p /usr/share/games && ln -s "$corpus" /usr/share/games/fortunes; }

for step in $steps; do
  case "$step" in
    test)
      # The CPU suite (the plugins built by nvcc, on host buffers), then the GPU tests.
      for label in "-LE cuda" "-L cuda"; do
        name=ctest$(echo "$label" | tr -d ' ')
        (cd build-gpu && ctest -j 8 $label --output-on-failure --timeout 600) > "$out/$name.log" 2>&1
        log "ctest $label exit $?: $(grep -E 'tests passed|tests failed' "$out/$name.log" | tail -1)"
        grep -E "^\s+[0-9]+ - " "$out/$name.log" | head -20 | tee -a "$out/summary.txt"
      done ;;
    bench)
      # GPU: every format and mode; CPU (one core): the same plugins built by nvcc, large arrays.
      build-gpu/altgrad_quantize_bench --benchmark_filter='^cuda_|/64MiB' --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true > "$out/quantize_bench.txt" 2>&1
      log "quantize bench exit $?"
      grep -E "median" "$out/quantize_bench.txt" | grep -E "e5m2|copy" | tee -a "$out/summary.txt" ;;
    train)
      for device in cuda cpu; do
        rm -rf "/tmp/run-$device"
        build-gpu/altgrad-host --plugins build-gpu/plugins run configs/e5m2_short.toml --out "/tmp/run-$device" \
          --set training.device=$device --set data.path="$corpus" > "$out/train_$device.log" 2>&1
        log "train $device exit $?: $(tail -4 "$out/train_$device.log" | head -1)"
      done
      # Resume on the GPU with dropout: 40 steps whole, then the same run resumed
      # from its step-20 checkpoint; the metrics (less tokens_per_s) must agree.
      rm -rf /tmp/resume-whole /tmp/resume-cut
      build-gpu/altgrad-host --plugins build-gpu/plugins run configs/e5m2_short.toml --out /tmp/resume-whole \
        --set training.device=cuda --set data.path="$corpus" --set training.max_steps=40 \
        --set training.warmup_steps=5 --set model.dropout=0.1 --set output.checkpoint_interval=20 --set output.keep_checkpoints=5 \
        > "$out/resume_whole.log" 2>&1
      log "resume: whole run exit $?"
      cp -r /tmp/resume-whole /tmp/resume-cut && rm -rf /tmp/resume-cut/checkpoints/step_0000040
      build-gpu/altgrad-host --plugins build-gpu/plugins run --resume /tmp/resume-cut > "$out/resume_cut.log" 2>&1
      log "resume: resumed run exit $?"
      if [[ -s /tmp/resume-whole/metrics.jsonl ]] && diff <(sed 's/, "tokens_per_s": [^,}]*//' /tmp/resume-whole/metrics.jsonl) \
              <(sed 's/, "tokens_per_s": [^,}]*//' /tmp/resume-cut/metrics.jsonl) > "$out/resume_diff.txt"; then
        log "resume on cuda with dropout: metrics equal"
      else
        log "resume on cuda with dropout: metrics DIFFER (resume_diff.txt)"
      fi ;;
    *) log "unknown step $step" ;;
  esac
done
