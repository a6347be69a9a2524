#!/usr/bin/env bash
# 2 ranks (Gloo on loopback) train bit for bit as one process with
# training.grad_accum = 2 (docs/distributed.md): the same metrics (floats
# exact, timings aside, as scripts/comparable_metrics.py prints them) and the
# same final weights (model.pt, byte for byte), for e5m2_short and
# TransformerEngine's MXFP8 recipe (also with their gradients quantized before
# the sum, [quantization.communication]), launched by `run --nproc 2` and by
# torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Then:
# a rank killed with SIGKILL ends the run with exit 4 and a summary naming
# it; the run resumes with 2 ranks, and as one process with grad_accum = 2,
# and both end as the uninterrupted run. And the errors a user can cause:
# configs that differ between ranks, a taken port, an unreachable master.
# Usage: two_ranks.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
comparable() { /usr/bin/python3 "$src/scripts/comparable_metrics.py" "$1/metrics.jsonl"; }
fail() { echo "two_ranks: $*" >&2; exit 1; }
run() { "$host" --plugins "$plugins" run "$@"; }
wait_for() {  # FILE SECONDS WHAT: until FILE exists, or fail saying WHAT
  local deadline=$((SECONDS + $2))
  until [ -e "$1" ]; do
    [ $SECONDS -lt "$deadline" ] || fail "$3 within $2 s"
    sleep 0.05
  done
}
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
same_run() {  # A B: equal metrics and final weights
  diff <(comparable "$1") <(comparable "$2") > "$work/diff.txt" ||
    fail "$1 and $2 differ: $(head -c 600 "$work/diff.txt")"
  last="$(ls "$1/checkpoints" | grep '^step_' | sort | tail -1)"
  cmp "$1/checkpoints/$last/model.pt" "$2/checkpoints/$last/model.pt" || fail "$1 and $2: model.pt of $last differs"
}
small=(--set model.n_layer=2 --set model.n_embd=64 --set model.n_head=2 --set model.block_size=64
       --set training.batch_size=4 --set training.max_steps=8 --set training.warmup_steps=2
       --set training.eval_interval=4 --set training.eval_batches=2 --set quantization.diagnostic_interval=4
       --set output.checkpoint_interval=4 --set training.threads=1)

# 1. --nproc 2 against grad_accum = 2.
for config in configs/e5m2_short.toml configs/recipes/te_mxfp8.toml; do
  name="$(basename "$config" .toml)"
  run "$src/$config" "${small[@]}" --set training.grad_accum=2 --out "$work/$name-accum" > "$work/$name-accum.log" 2>&1 ||
    fail "$name with grad_accum = 2 failed: $(tail -1 "$work/$name-accum.log")"
  run "$src/$config" "${small[@]}" --nproc 2 --out "$work/$name-ranks" > "$work/$name-ranks.log" 2>&1 ||
    fail "$name on 2 ranks failed: $(tail -1 "$work/$name-ranks.log")"
  grep -q "^2 ranks (RANK, WORLD_SIZE, rendezvous 127.0.0.1:" "$work/$name-ranks.log" || fail "$name: no ranks line"
  same_run "$work/$name-accum" "$work/$name-ranks"
  echo "two_ranks: $name: 2 ranks = grad_accum 2, bit for bit"
done
# 3 ranks: the reduce-scatter's shards are uneven (the gradients' length is not a multiple of 3).
run "$src/configs/e5m2_short.toml" "${small[@]}" --set training.grad_accum=3 --out "$work/accum3" > "$work/accum3.log" 2>&1 ||
  fail "grad_accum = 3 failed: $(tail -1 "$work/accum3.log")"
run "$src/configs/e5m2_short.toml" "${small[@]}" --nproc 3 --out "$work/ranks3" > "$work/ranks3.log" 2>&1 ||
  fail "3 ranks failed: $(tail -1 "$work/ranks3.log")"
same_run "$work/accum3" "$work/ranks3"
echo "two_ranks: 3 ranks = grad_accum 3, bit for bit"
# The comparison can tell: one process at batch 8 trains on the same rows, in another order of sums.
run "$src/configs/e5m2_short.toml" "${small[@]}" --set training.batch_size=8 --out "$work/batch8" > /dev/null 2>&1
if diff -q <(comparable "$work/e5m2_short-accum") <(comparable "$work/batch8") > /dev/null; then
  fail "one batch of 8 gave grad_accum 2's bits: the comparison cannot fail"
fi

# 1b. Quantized communication ([quantization.communication]): each rank's gradient in E5M2 (per
# tensor, current scaling, stochastic rounding) or in MXFP8 blocks, summed in float32 in rank order:
# again grad_accum 2's bits, and not the bits of gradients sent as computed.
comm_e5m2='quantization.communication.gradients={ format = "e5m2", scaling = "current" }'
comm_mxfp8='quantization.communication.gradients={ format = "e4m3", granularity = "block", block_size = 32, scale_format = "ue8m0" }'
for pair in "configs/e5m2_short.toml|$comm_e5m2" "configs/recipes/te_mxfp8.toml|$comm_mxfp8"; do
  config="${pair%%|*}" comm="${pair#*|}"
  name="$(basename "$config" .toml)-comm"
  run "$src/$config" "${small[@]}" --set "$comm" --set training.grad_accum=2 --out "$work/$name-accum" > "$work/$name-accum.log" 2>&1 ||
    fail "$name with grad_accum = 2 failed: $(tail -1 "$work/$name-accum.log")"
  run "$src/$config" "${small[@]}" --set "$comm" --nproc 2 --out "$work/$name-ranks" > "$work/$name-ranks.log" 2>&1 ||
    fail "$name on 2 ranks failed: $(tail -1 "$work/$name-ranks.log")"
  same_run "$work/$name-accum" "$work/$name-ranks"
  grep -q '"tensor":"blocks.0.mlp.fc.weight.communication","role":"weight_gradient"' "$work/$name-ranks/metrics.jsonl" ||
    fail "$name: no tensor line for blocks.0.mlp.fc.weight.communication"
  if diff -q <(comparable "$work/$name-accum") <(comparable "$work/${name%-comm}-accum") > /dev/null; then
    fail "$name: quantized communication gave the bits of gradients sent as computed"
  fi
  echo "two_ranks: $name: 2 ranks = grad_accum 2, bit for bit, gradients sent quantized"
done

# 2. torchrun's environment: two processes started by hand.
port="$(free_port)"
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    run "$src/configs/e5m2_short.toml" "${small[@]}" --out "$work/env" > "$work/env$r.log" 2>&1 &
done
wait -n && wait -n || fail "the ranks launched by RANK/WORLD_SIZE failed: $(tail -1 "$work/env0.log") $(tail -1 "$work/env1.log")"
same_run "$work/e5m2_short-accum" "$work/env"
[ ! -s "$work/env1.log" ] || fail "rank 1 printed: $(head -3 "$work/env1.log")"
echo "two_ranks: torchrun's environment = grad_accum 2, bit for bit"

# 3. A rank killed with SIGKILL: both end, exit 4, the summary names the rank.
long=("${small[@]}" --set training.max_steps=60 --set output.checkpoint_interval=10 --set output.keep_checkpoints=10)
run "$src/configs/e5m2_short.toml" "${long[@]}" --set training.grad_accum=2 --out "$work/whole" > /dev/null 2>&1 ||
  fail "the uninterrupted run failed"
"$host" --plugins "$plugins" run "$src/configs/e5m2_short.toml" "${long[@]}" --nproc 2 --out "$work/killed" > "$work/killed.log" 2>&1 &
launcher=$!
wait_for "$work/killed/checkpoints/step_0000020/state.json" 120 "no checkpoint at step 20"
rank1=""
for child in $(pgrep -P "$launcher"); do
  if [ "$(cat "/proc/$child/comm")" = altgrad-rank1 ]; then rank1=$child; fi
done
[ -n "$rank1" ] || fail "rank 1's process not found among the launcher's children"
killed_at=$SECONDS
kill -9 "$rank1"
rc=0
wait "$launcher" || rc=$?
[ "$rc" -eq 4 ] || fail "the launcher exited $rc after rank 1 was killed; expected 4: $(tail -2 "$work/killed.log")"
[ $((SECONDS - killed_at)) -le 30 ] || fail "the run took $((SECONDS - killed_at)) s to stop after the kill"
/usr/bin/python3 - "$work/killed/summary.json" <<'PY' || fail "summary.json: $(cat "$work/killed/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "crashed", s["status"]
assert "rank 1 of 2" in s["failure_evidence"], s["failure_evidence"]
PY
grep -q "^altgrad-host: rank 1 of 2: .*signal 9 (SIGKILL.*run --resume $work/killed --nproc 2$" "$work/killed.log" || fail "no line naming rank 1: $(tail -2 "$work/killed.log")"
echo "two_ranks: a killed rank stopped the run in $((SECONDS - killed_at)) s, exit 4, the summary names it"

# 4. Resumed with 2 ranks, and as one process at the same global batch: both end as the whole run.
cp -r "$work/killed" "$work/killed-one"
run --resume "$work/killed" --nproc 2 > "$work/resume2.log" 2>&1 || fail "resume on 2 ranks: $(tail -1 "$work/resume2.log")"
same_run "$work/whole" "$work/killed"
run --resume "$work/killed-one" --set training.grad_accum=2 > "$work/resume1.log" 2>&1 ||
  fail "resume as one process: $(tail -1 "$work/resume1.log")"
same_run "$work/whole" "$work/killed-one"
echo "two_ranks: resumed with 2 ranks and with 1 process x grad_accum 2: the uninterrupted run's bits"

# 5. Errors, one line each.
port="$(free_port)"
for r in 0 1; do
  seed=$((7 + r))
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    run "$src/configs/e5m2_short.toml" "${small[@]}" --set training.seed=$seed --out "$work/differ" > "$work/differ$r.log" 2>&1 &
done
rc0=0 rc1=0
wait -n || rc0=$?
wait -n || rc1=$?
[ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] || fail "ranks with different configs were not refused"
grep -h "error" "$work/differ0.log" "$work/differ1.log" | grep -q "the resolved config differs between rank 0 and rank 1" ||
  fail "differing configs: $(cat "$work/differ0.log" "$work/differ1.log")"
if [ -e "$work/differ/metrics.jsonl" ] && grep -q '"kind":"train"' "$work/differ/metrics.jsonl"; then
  fail "a step ran with differing configs"
fi

taken="$(free_port)"
/usr/bin/python3 -c '
import pathlib, socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
pathlib.Path(sys.argv[2]).touch(); time.sleep(60)' "$taken" "$work/listening" &
listener=$!
wait_for "$work/listening" 60 "the listener on port $taken did not start"
rc=0
MASTER_PORT=$taken run "$src/configs/e5m2_short.toml" "${small[@]}" --nproc 2 --out "$work/taken" > "$work/taken.log" 2>&1 || rc=$?
kill "$listener" 2> /dev/null || true
[ "$rc" -eq 1 ] || fail "a taken port: exit $rc"
grep -q "rank 0 of 2: cannot serve the rendezvous at 127.0.0.1:$taken" "$work/taken.log" || fail "a taken port: $(cat "$work/taken.log")"

rc=0
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" run "$src/configs/e5m2_short.toml" "${small[@]}" \
  --set training.distributed.timeout_s=2 --out "$work/alone" > "$work/alone.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "an unreachable master: exit $rc"
grep -q "rank 1 of 2: cannot reach the rendezvous at 127.0.0.1:" "$work/alone.log" || fail "an unreachable master: $(cat "$work/alone.log")"
[ "$(grep -c . "$work/alone.log")" -eq 1 ] || fail "an unreachable master: more than one line: $(cat "$work/alone.log")"
echo "two_ranks: differing configs, a taken port and an unreachable master: one line each"

# NCCL: on the CPU it cannot work, and this host (Debian's CPU LibTorch) has none: one line each, before any rendezvous.
for device in cpu cuda; do
  rc=0
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" run "$src/configs/e5m2_short.toml" "${small[@]}" \
    --set training.distributed.backend=nccl --set training.device=$device --out "$work/nccl-$device" > "$work/nccl-$device.log" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] && [ "$(grep -c . "$work/nccl-$device.log")" -eq 1 ] || fail "nccl on $device: exit $rc: $(cat "$work/nccl-$device.log")"
done
grep -q "key 'training.distributed.backend': nccl: NCCL moves GPU memory; it needs training.device = \"cuda\"" "$work/nccl-cpu.log" ||
  fail "nccl on the CPU: $(cat "$work/nccl-cpu.log")"
grep -q "key 'training.distributed.backend': nccl: this host was built without NCCL" "$work/nccl-cuda.log" ||
  fail "nccl without NCCL: $(cat "$work/nccl-cuda.log")"
echo "two_ranks: NCCL on the CPU, and in a host without NCCL: one line each"
