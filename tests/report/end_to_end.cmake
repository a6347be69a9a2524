# End to end: `altgrad-host run` twice on short versions of the seed configs,
# then `altgrad-host report` on both run directories. Run by CTest:
#   cmake -DHOST=... -DPLUGINS=... -DCONFIGS=... -DWORK=... -P end_to_end.cmake
foreach(var HOST PLUGINS CONFIGS WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "end_to_end.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

function(train config out)
  execute_process(
    COMMAND "${HOST}" --plugins "${PLUGINS}" run "${CONFIGS}/${config}" --out "${WORK}/${out}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run ${config} exited ${rc}:\n${log}")
  endif()
endfunction()

# warmup_steps must not exceed max_steps; diagnostics every 10 steps so the
# report has diagnostic series to plot.
train(e5m2_short.toml e5m2 --set training.max_steps=20 --set training.eval_interval=10
  --set training.warmup_steps=5 --set quantization.diagnostic_interval=10)
train(bf16_baseline.toml bf16 --set training.max_steps=10 --set training.eval_interval=5
  --set training.warmup_steps=2 --set quantization.diagnostic_interval=5)

execute_process(
  COMMAND "${HOST}" report "${WORK}/e5m2" "${WORK}/bf16" -o "${WORK}/report"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report exited ${rc}:\n${out}")
endif()
if(NOT EXISTS "${WORK}/report/report.md")
  message(FATAL_ERROR "report wrote no ${WORK}/report/report.md:\n${out}")
endif()
file(READ "${WORK}/report/report.md" md)

# One row per run: its folder, config name and steps done of planned.
foreach(row "`${WORK}/e5m2` | e5m2_short | 42 | e5m2 | 20/20 |"
            "`${WORK}/bf16` | bf16_baseline | 42 | bf16 | 10/10 |")
  string(FIND "${md}" "${row}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "report.md has no row starting \"${row}\":\n${md}")
  endif()
endforeach()
string(REGEX MATCHALL "\n\\| `[^\n]*" rows "${md}")
list(LENGTH rows n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "report.md has ${n} run rows, expected 2:\n${md}")
endif()
foreach(section "## Summary" "## Formats compared across seeds" "## Failure modes: hypothesised and observed"
        "## Figures" "## Runs")
  string(FIND "${md}" "${section}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "report.md lacks \"${section}\":\n${md}")
  endif()
endforeach()
# The summary as data: a header and a row per group, the baseline first.
file(STRINGS "${WORK}/report/summary.csv" summary)
list(LENGTH summary n)
list(GET summary 1 first)
if(NOT n EQUAL 3 OR NOT first MATCHES "^bf16_baseline,,1,")
  message(FATAL_ERROR "summary.csv: expected a header, the baseline and one group:\n${summary}")
endif()
message(STATUS "report.md:\n${md}")
