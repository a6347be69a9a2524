#!/usr/bin/env bash
# altgrad-host parity on the CPU (issue #48): the CPU against itself with one thread must give the
# same bits for every published recipe, and a change made on one side only (--against-set) must
# show in the operands it reaches and in none other. On a GPU machine scripts/gpu_check.sh runs
# the same command against CUDA. Two blocks keep it to seconds a recipe.
# Usage: parity.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
fail() { echo "parity: $*" >&2; exit 1; }
small=(--set model.n_layer=2 --set training.threads=2 --steps 2 --tokens 64)
# Two blocks of four linear layers (attention QKV and projection, MLP in and out) and the head:
# 9 layers, each called twice, so 18 tensors of every operand.
row() { grep -E "^\| $2 \|" "$1" || fail "no row '$2' in $1"; }
tensors() { row "$1" "$2" | awk -F'|' '{ gsub(/ /, "", $3); print $3 }'; }
differing() { row "$1" "$2" | awk -F'|' '{ gsub(/ /, "", $5); print $5 }'; }
elements() { row "$1" "$2" | awk -F'|' '{ gsub(/ /, "", $4); print $4 }'; }
operands=(x w dy "w@input_gradient" "dy@weight_gradient" "x@weight_gradient")

# 1. Every recipe, and the E5M2 control: the same bits whatever the CPU's threads.
for config in "$src"/configs/recipes/*.toml "$src/configs/e5m2_short.toml"; do
  name="$(basename "$config" .toml)"
  "$host" --plugins "$plugins" parity "$config" --device cpu "${small[@]}" > "$work/$name.txt" 2> "$work/$name.err" ||
    fail "$name: exit $? $(cat "$work/$name.err")"
  grep -qx "same bits" "$work/$name.txt" || fail "$name: not the same bits: $(tail -3 "$work/$name.txt")"
  for op in "${operands[@]}"; do
    [ "$(tensors "$work/$name.txt" "$op")" = 18 ] || fail "$name: $op: $(row "$work/$name.txt" "$op")"
    [ "$(differing "$work/$name.txt" "$op")" = 0 ] || fail "$name: $op differs"
  done
done
# DeepSeek-V3's accumulators run on the CPU only: said, not silently skipped.
grep -q "^not compared: the products through accumulators" "$work/deepseek_v3.txt" ||
  fail "deepseek_v3: the accumulators are not named as not compared"

# 2. Round-to-nearest on one side, stochastic rounding (the default backward rounding) on the
#    other: only the output gradient's copies change. Stochastic rounding leaves a value at
#    fraction f of its grid step for the step above with probability f, and nearest rounding
#    takes the nearer: they disagree with probability min(f, 1 - f), a quarter for f uniform.
set +e
"$host" --plugins "$plugins" parity "$src/configs/e5m2_short.toml" --device cpu "${small[@]}" \
  --against-set quantization.backward_rounding=nearest > "$work/rounding.txt" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || fail "rounding: exit $rc, expected 3 (bits differ): $(tail -3 "$work/rounding.txt")"
for op in x w "w@input_gradient" "x@weight_gradient"; do
  [ "$(differing "$work/rounding.txt" "$op")" = 0 ] || fail "rounding: $op changed"
done
for op in dy "dy@weight_gradient"; do
  d="$(differing "$work/rounding.txt" "$op")" n="$(elements "$work/rounding.txt" "$op")"
  /usr/bin/python3 -c "import sys; f = $d / $n; sys.exit(0 if 0.2 < f < 0.3 else 1)" ||
    fail "rounding: $op: $d of $n differ, expected about a quarter"
done
grep -qE "^differs: blocks\.0\.attn\.qkv dy, step 0: [0-9]+ of [0-9]+ \(element [0-9]+: " "$work/rounding.txt" ||
  fail "rounding: the first differing tensor is not listed: $(grep -m1 '^differs' "$work/rounding.txt")"

# 3. The gradients the ranks send ([quantization.communication]): one per parameter and step.
comm='quantization.communication.gradients={ format = "e5m2", scaling = "current" }'
"$host" --plugins "$plugins" parity "$src/configs/e5m2_short.toml" --device cpu "${small[@]}" --set "$comm" \
  > "$work/communication.txt" 2>&1 || fail "communication: $(tail -3 "$work/communication.txt")"
# Parameters of two blocks: tok_emb, pos_emb, per block 2 LayerNorms (2 each) and 4 linear layers
# (weight and bias each), then ln_f (2): 2 + 2 * (4 + 8) + 2 = 28, twice.
[ "$(tensors "$work/communication.txt" communication)" = 56 ] ||
  fail "communication: $(row "$work/communication.txt" communication)"

# 4. Bad input: one line, naming what is wrong, and the exit code the help gives.
expect() {  # EXIT PATTERN ARGS...: the exit code and a one-line error matching PATTERN
  local want="$1" pattern="$2"
  shift 2
  set +e
  "$host" --plugins "$plugins" parity "$@" > "$work/out.txt" 2> "$work/err.txt"
  local got=$?
  set -e
  [ "$got" = "$want" ] || fail "parity $*: exit $got, expected $want: $(cat "$work/err.txt")"
  [ "$(wc -l < "$work/err.txt")" = 1 ] || fail "parity $*: not one line: $(cat "$work/err.txt")"
  grep -q -- "$pattern" "$work/err.txt" || fail "parity $*: '$(cat "$work/err.txt")' lacks '$pattern'"
}
expect 1 "--device 'tpu': expected cuda or cpu" "$src/configs/e5m2_short.toml" --device tpu
expect 2 "positive number" "$src/configs/e5m2_short.toml" --steps 0
expect 2 "give a CONFIG.toml" --device cpu
expect 1 "must stay the same on both sides" "$src/configs/e5m2_short.toml" --device cpu --against-set model.n_layer=2
expect 1 "key 'quantization.backward_rounding'" "$src/configs/e5m2_short.toml" --device cpu \
  --against-set quantization.backward_rounding=sideways
# This build's LibTorch (Debian's) has no CUDA: the GPU side is refused, saying why.
if ! "$host" --plugins "$plugins" parity "$src/configs/e5m2_short.toml" "${small[@]}" > /dev/null 2>&1; then
  expect 1 "(parity --device cuda): key 'training.device'" "$src/configs/e5m2_short.toml"
fi
echo "parity: ok"
