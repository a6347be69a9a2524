#!/usr/bin/python3
"""Prints a metrics.jsonl as comparable lines: JSON with sorted keys, floats
as hex (exact), without the run id and the throughput, which are not results.
Two runs that trained alike print the same text (scripts/soak.sh,
tests/run/interrupt_resume.sh). Usage: comparable_metrics.py METRICS.jsonl"""
import json
import sys


def exact(v):
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, dict):
        return {k: exact(x) for k, x in v.items()}
    if isinstance(v, list):
        return [exact(x) for x in v]
    return v


for line in open(sys.argv[1]):
    rec = json.loads(line)
    for key in ("run_id", "tokens_per_s"):
        rec.pop(key, None)
    print(json.dumps(exact(rec), sort_keys=True))
