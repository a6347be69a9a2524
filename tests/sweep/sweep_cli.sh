#!/usr/bin/env bash
# altgrad-host sweep end to end on a tiny sweep (2 configs x 2 seeds, 30
# steps of a shrunken model, about 3 s a run): --jobs 2 finishes every run;
# a rerun skips them all; a run whose summary and checkpoints are deleted is
# the only one redone; SIGINT to the sweep (or a kill -9 of it) and the same
# command again finish the interrupted run by resuming it, with exactly the
# metrics of the same run never interrupted; --task stops on SIGTERM and
# resumes as a requeued Slurm task; a run another process holds is not
# started twice; bad input and --task out of range give
# one line; a failing run is listed with its log; --slurm hands its job
# script and arguments to sbatch (a stand-in); a run of 2 ranks runs here on
# 2 ranks, bit for bit as one rank at grad_accum 2, and gets a job script of
# its own.
# Usage: sweep_cli.sh HOST PLUGINS SOURCE_DIR WORK
set -euo pipefail
host="$1" plugins="$2" src="$3" work="$4"
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() { echo "sweep_cli: $*" >&2; exit 1; }
comparable() { /usr/bin/python3 "$src/scripts/comparable_metrics.py" "$1"; }
status_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$1/summary.json"; }
sweep() { "$host" --plugins "$plugins" sweep "$@"; }

shrink='"model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32", "training.batch_size=4",
  "training.warmup_steps=5", "training.eval_interval=10", "training.eval_batches=2",
  "quantization.diagnostic_interval=10", "output.checkpoint_interval=10"'
mkdir sweeps
cat > sweeps/tiny.toml <<TOML
name = "tiny"
configs = ["$src/configs/e5m2_short.toml", "$src/configs/bf16_baseline.toml"]
seeds = [1, 2]
set = [$shrink, "training.max_steps=30"]
TOML
names="e5m2_short-s1 e5m2_short-s2 bf16_baseline-s1 bf16_baseline-s2"

# 1. Every run finished, with --jobs 2; stdout is the sweep's folder.
out=$(sweep sweeps/tiny.toml --jobs 2 2> first.err) || fail "the sweep failed: $(tail -3 first.err)"
[ "$out" = runs/tiny ] || fail "stdout: '$out', expected runs/tiny"
for n in $names; do
  [ "$(status_of runs/tiny/$n)" = finished ] || fail "$n: not finished"
  [ -s runs/tiny/logs/$n.log ] || fail "$n: no log"
done
grep -q "sweep tiny: 4 done, 0 running, 0 failed, 0 left, ETA 0s" first.err || fail "no final progress line: $(tail -2 first.err)"
echo "4 runs finished with --jobs 2"

# 2. Rerun: everything skipped, dry-run says finished.
sweep sweeps/tiny.toml --dry-run > dry.txt
[ "$(grep -c ' finished ' dry.txt)" -eq 4 ] || fail "dry-run after the sweep: $(cat dry.txt)"
sweep sweeps/tiny.toml --jobs 2 > /dev/null 2> second.err || fail "the rerun failed"
! grep -q "started" second.err || fail "the rerun started a run: $(grep started second.err)"
echo "rerun: all 4 skipped"

# 3. One run's summary and checkpoints gone: only it is redone (from the start).
cp runs/tiny/e5m2_short-s1/summary.json kept.json
rm -r runs/tiny/bf16_baseline-s2/summary.json runs/tiny/bf16_baseline-s2/checkpoints
grep -q '^3 *bf16_baseline-s2 *new ' <(sweep sweeps/tiny.toml --dry-run) || fail "dry-run: bf16_baseline-s2 is not new"
sweep sweeps/tiny.toml --jobs 2 > /dev/null 2> third.err || fail "the third run failed: $(tail -3 third.err)"
[ "$(grep -c ': started' third.err)" -eq 1 ] && grep -q "run 3 bf16_baseline-s2: started" third.err ||
  fail "expected only run 3 started: $(grep started third.err)"
grep -q "run 3 bf16_baseline-s2: cleared its run directory" third.err || fail "the stale folder was not cleared"
[ "$(status_of runs/tiny/bf16_baseline-s2)" = finished ] || fail "bf16_baseline-s2 not finished again"
cmp -s kept.json runs/tiny/e5m2_short-s1/summary.json || fail "e5m2_short-s1 was run again"
echo "deleted run redone alone"
# `report OUT/*/` reads the sweep's runs and passes over its logs/.
"$host" report runs/tiny/*/ --no-figures -o report > report.out 2>&1 || fail "report OUT/*/: $(cat report.out)"
grep -q "report.md (4 runs, 0 figures)" report.out || fail "report OUT/*/: $(cat report.out)"
echo "report runs/tiny/*/: 4 runs"

# 4. SIGINT to the sweep after its first run starts: exit 130, a checkpoint;
# the same command resumes the run to metrics identical to an uninterrupted one.
cat > sweeps/long.toml <<TOML
name = "long"
configs = ["$src/configs/e5m2_short.toml"]
seeds = [3]
set = [$shrink, "training.max_steps=200", "output.keep_checkpoints=2"]
TOML
sweep sweeps/long.toml --out whole > /dev/null 2> whole.err || fail "the uninterrupted run failed: $(tail -2 whole.err)"
"$host" --plugins "$plugins" sweep sweeps/long.toml --out cut > /dev/null 2> cut.err &
pid=$!
while kill -0 "$pid" 2>/dev/null && ! [ -s cut/e5m2_short-s3/metrics.jsonl ]; do sleep 0.01; done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT: exit $rc, expected 130 ($(tail -2 cut.err))"
grep -q "SIGINT: stopped; .*continue with the same command: .* sweep sweeps/long.toml --out cut" cut.err ||
  fail "no line saying how to continue: $(tail -2 cut.err)"
[ "$(status_of cut/e5m2_short-s3)" = interrupted ] || fail "the interrupted run's summary: $(status_of cut/e5m2_short-s3)"
grep -q '^0 *e5m2_short-s3 *interrupted .* run --resume ' <(sweep sweeps/long.toml --out cut --dry-run) ||
  fail "dry-run does not show the run as interrupted, resumed"
sweep sweeps/long.toml --out cut > /dev/null 2> resume.err || fail "the rerun failed: $(tail -2 resume.err)"
grep -q "run 0 e5m2_short-s3: resumed from its checkpoint" resume.err || fail "the rerun did not resume"
[ "$(status_of cut/e5m2_short-s3)" = finished ] || fail "the resumed run did not finish"
comparable cut/e5m2_short-s3/metrics.jsonl | cmp -s - <(comparable whole/e5m2_short-s3/metrics.jsonl) ||
  fail "resumed metrics differ from the uninterrupted run's"
echo "SIGINT: exit 130; the same command resumed it: metrics identical to an uninterrupted run"

# 4a. kill -9 of the sweep: its worker gets SIGTERM (it dies with the sweep) and
# checkpoints; the same command then resumes it.
"$host" --plugins "$plugins" sweep sweeps/long.toml --out killed > /dev/null 2> killed.err &
pid=$!
while kill -0 "$pid" 2>/dev/null && ! [ -s killed/e5m2_short-s3/metrics.jsonl ]; do sleep 0.01; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
for _ in $(seq 300); do [ -s killed/e5m2_short-s3/summary.json ] && break; sleep 0.1; done
[ "$(status_of killed/e5m2_short-s3)" = interrupted ] || fail "after kill -9 of the sweep: the run is not interrupted"
flock killed/logs/e5m2_short-s3.lock true  # the worker holds its run's lock until it has exited
sweep sweeps/long.toml --out killed > /dev/null 2> killed2.err || fail "the rerun after kill -9 failed: $(tail -2 killed2.err)"
grep -q "resumed from its checkpoint" killed2.err || fail "the rerun after kill -9 did not resume"
comparable killed/e5m2_short-s3/metrics.jsonl | cmp -s - <(comparable whole/e5m2_short-s3/metrics.jsonl) ||
  fail "after kill -9 and resume: metrics differ from the uninterrupted run's"
echo "kill -9 of the sweep: its worker checkpointed; the same command resumed it (metrics identical)"

# 4b. --task, as a Slurm array task runs it: SIGTERM (pre-emption) exits 130 with a
# checkpoint; the requeued task (the same command) resumes; once done, it is skipped.
"$host" --plugins "$plugins" sweep sweeps/long.toml --out requeue --task 0 > /dev/null 2> task1.err &
pid=$!
while kill -0 "$pid" 2>/dev/null && ! [ -s requeue/e5m2_short-s3/metrics.jsonl ]; do sleep 0.01; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || fail "--task, SIGTERM: exit $rc, expected 130 ($(tail -2 task1.err))"
got=$(sweep sweeps/long.toml --out requeue --task 0 2> task2.err) || fail "the requeued task failed: $(tail -2 task2.err)"
[ "$got" = requeue/e5m2_short-s3 ] || fail "--task stdout: '$got'"
grep -q "resumed from its checkpoint" task2.err || fail "the requeued task did not resume"
comparable requeue/e5m2_short-s3/metrics.jsonl | cmp -s - <(comparable whole/e5m2_short-s3/metrics.jsonl) ||
  fail "the requeued task's metrics differ from the uninterrupted run's"
sweep sweeps/long.toml --out requeue --task 0 > /dev/null 2> task3.err || fail "--task on a finished run failed"
grep -q "run 0 e5m2_short-s3: already finished" task3.err || fail "--task on a finished run: $(cat task3.err)"
echo "--task: SIGTERM exit 130, the requeued task resumed (metrics identical), then skipped"

# 4c. A run another process holds (its lock taken) is not started twice: it is reported.
rm -r requeue/e5m2_short-s3
exec 9> requeue/logs/e5m2_short-s3.lock
flock 9
rc=0
sweep sweeps/long.toml --out requeue > /dev/null 2> locked.err || rc=$?
exec 9>&-
[ "$rc" -eq 1 ] && grep -q "run 0 e5m2_short-s3: not started: another sweep process is running it" locked.err ||
  fail "a locked run: exit $rc: $(cat locked.err)"
[ ! -e requeue/e5m2_short-s3 ] || fail "a locked run was started"
echo "a run locked by another process: not started, reported"

# 5. Bad input: one line, the right exit status, nothing run.
rc=0
sweep sweeps/tiny.toml --task 4 > /dev/null 2> task.err || rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l < task.err)" -eq 1 ] && grep -q -- "--task 4: .* has runs 0..3" task.err ||
  fail "--task 4: exit $rc: $(cat task.err)"
printf 'name = "bad"\nconfigs = ["%s"]\n[grid]\n"training.max_steps" = [10, -1]\n' "$src/configs/e5m2_short.toml" > sweeps/bad.toml
rc=0
sweep sweeps/bad.toml > /dev/null 2> bad.err || rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l < bad.err)" -eq 1 ] &&
  grep -q "sweeps/bad.toml: point 2 (training.max_steps=-1), seed 42: .*key 'training.max_steps'" bad.err ||
  fail "a bad grid value: exit $rc: $(cat bad.err)"
[ ! -e runs/bad ] || fail "a bad sweep created its folder"
echo "bad input: one line each"

# A run that fails (its data is missing: only the trainer checks that) is listed with its log: exit 1.
printf 'name = "broken"\nconfigs = ["%s"]\nset = ["data.path=%s/no-such-corpus"]\n' "$src/configs/e5m2_short.toml" "$work" > sweeps/broken.toml
rc=0
sweep sweeps/broken.toml > /dev/null 2> broken.err || rc=$?
[ "$rc" -eq 1 ] && grep -q "sweep broken: failed: run 0 e5m2_short-s42 (exit 1), log runs/broken/logs/e5m2_short-s42.log" broken.err &&
  grep -q "0 done, 0 running, 1 failed, 0 left" broken.err || fail "a failing run: exit $rc: $(cat broken.err)"
grep -q "no-such-corpus" runs/broken/logs/*.log || fail "the failing run's log does not say why"
echo "a failing run: listed with its log, exit 1"

# 6. --slurm: the job script arrays the runs not done, sbatch gets it and the arguments.
mkdir bin
printf '#!/bin/sh\nprintf "%%s\\n" "$@" > "%s/sbatch.args"\necho "Submitted batch job 17"\n' "$work" > bin/sbatch
chmod +x bin/sbatch
rm -r runs/tiny/e5m2_short-s2/summary.json runs/tiny/e5m2_short-s2/checkpoints
got=$(PATH="$work/bin:$PATH" sweep sweeps/tiny.toml --slurm --slurm-args "--partition=debug --comment='a b'" 2> slurm.err) ||
  fail "--slurm failed: $(cat slurm.err)"
[ "$got" = "Submitted batch job 17" ] || fail "sbatch's output: $got"
printf -- '--partition=debug\n--comment=a b\n%s/runs/tiny/slurm/sweep.sbatch\n' "$work" | cmp -s - sbatch.args ||
  fail "sbatch's arguments: $(cat sbatch.args)"
grep -qx '#SBATCH --array=1' runs/tiny/slurm/sweep.sbatch || fail "array: $(grep array runs/tiny/slurm/sweep.sbatch)"
rc=0
PATH=/nonexistent "$host" --plugins "$plugins" sweep sweeps/tiny.toml --slurm > /dev/null 2> nosbatch.err || rc=$?
[ "$rc" -eq 1 ] && [ "$(wc -l < nosbatch.err)" -eq 2 ] && grep -q "sbatch: cannot run: No such file" nosbatch.err ||
  fail "no sbatch: exit $rc: $(cat nosbatch.err)"
echo "--slurm: script and arguments handed to sbatch"

# 7. Runs of several ranks: a point of ntasks_per_node = 2 runs here as `run --nproc 2`, bit for
# bit as its sibling point at grad_accum = 2 on one rank (docs/distributed.md); --slurm gives it a
# job script of its own, with its allocation and --srun.
cat > sweeps/ranks.toml <<TOML
name = "ranks"
configs = ["$src/configs/e5m2_short.toml"]
seeds = [5]
set = [$shrink, "training.max_steps=10"]
[[point]]
name = "accum2"
set = ["training.grad_accum=2"]
[[point]]
name = "ranks2"
set = []
ntasks_per_node = 2
TOML
sweep sweeps/ranks.toml --dry-run > ranks.dry 2> /dev/null || fail "ranks: --dry-run failed"
grep -q "e5m2_short-ranks2-s5 .* --nproc 2$" ranks.dry || fail "ranks: no --nproc 2 in $(cat ranks.dry)"
sweep sweeps/ranks.toml --jobs 1 > /dev/null 2> ranks.err || fail "ranks: the sweep failed: $(tail -3 ranks.err)"
grep -q "^2 ranks (RANK, WORLD_SIZE" runs/ranks/logs/e5m2_short-ranks2-s5.log || fail "ranks: the run was not on 2 ranks"
comparable runs/ranks/e5m2_short-accum2-s5/metrics.jsonl | cmp -s - <(comparable runs/ranks/e5m2_short-ranks2-s5/metrics.jsonl) ||
  fail "ranks: 2 ranks and grad_accum 2 differ"
rm -r runs/ranks/e5m2_short-accum2-s5 runs/ranks/e5m2_short-ranks2-s5
PATH="$work/bin:$PATH" sweep sweeps/ranks.toml --slurm > /dev/null 2> ranks-slurm.err || fail "ranks: --slurm: $(cat ranks-slurm.err)"
grep -qx '#SBATCH --array=0' runs/ranks/slurm/sweep.sbatch || fail "ranks: one-rank array: $(grep array runs/ranks/slurm/sweep.sbatch)"
script=runs/ranks/slurm/sweep-1x2.sbatch
grep -qx '#SBATCH --array=1' "$script" && grep -qx '#SBATCH --ntasks-per-node=2' "$script" &&
  grep -q -- '--task "$SLURM_ARRAY_TASK_ID" --srun$' "$script" || fail "ranks: $script: $(cat "$script")"
echo "runs of 2 ranks: --nproc 2 here (grad_accum 2's bits), their own job script for Slurm"
