# out_of_tree.cmake: does a plugin written outside this repository build
# against the installed SDK, and does the host load and run it correctly?
#
# Script mode (cmake -P), run by the CTest test out_of_tree_plugin:
#
#   cmake -DHOST=<build>/altgrad-host -DBUILD_DIR=<build> -DSOURCE_DIR=<repo>
#         -DWORK=<scratch dir> [-DCONFIG=Release] [-DGENERATOR=Ninja]
#         [-DCXX_COMPILER=/usr/bin/c++] -P tests/out_of_tree/out_of_tree.cmake
#
# Steps (each failure names the step, the command and its output):
#   1. cmake --install BUILD_DIR --prefix WORK/prefix.
#   2. The INSTALLED host lists the INSTALLED bundled plugins, e5m2 ok.
#   2b. The installed host without --plugins uses the installed plugins, and
#      the examples are installed under share/doc/altgrad/examples.
#   3. The nf4 project docs/writing-a-plugin.md shows (its three files,
#      extracted from the page by tests/docs/doc_files.py, and the same bytes
#      as docs/examples/nf4) configures with only -DCMAKE_PREFIX_PATH=WORK/prefix
#      (AltGrad must be found there, and no compile command may reach into the
#      source tree's sdk/), builds, is listed ok, describes, and quantizes
#      inputs to the values expected from the NF4 table (computed
#      independently: nearest table value, saturating at +-1). Its library
#      holds the manifest's description (altgrad_add_plugin read it), and
#      beside a manifest of another version it is refused.
#   4. docs/examples/exmy_param likewise; as E5M2 (exponent_bits=5
#      mantissa_bits=2 bias=15) it must give the OCP E5M2 values, and the
#      same output as the bundled e5m2; other parameter sets (E2M1, P3109
#      E1M6) and rejected parameters are checked too.
#   5. `altgrad-host new-plugin` (the installed host) scaffolds a plugin of
#      each kind; each builds against the prefix and passes the conformance
#      kit as written; then, as its README says, it is installed into the
#      prefix and a short run trains with it (installed host, no --plugins).
#   6. docs/writing-a-plugin.md's shown commands run against the prefix and
#      print what the page shows.

cmake_minimum_required(VERSION 3.22)

foreach(var HOST BUILD_DIR SOURCE_DIR WORK HOST_TRAINS)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "out_of_tree: -D${var}=... is required (see the top of ${CMAKE_CURRENT_LIST_FILE})")
  endif()
endforeach()
if(NOT EXISTS "${HOST}")
  message(FATAL_ERROR "out_of_tree: the host ${HOST} does not exist (build the altgrad-host target first)")
endif()

set(PREFIX "${WORK}/prefix")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

# indent(<var> <text>): every line prefixed with four spaces, so that
# message() prints command output verbatim instead of re-wrapping it.
function(indent var text)
  string(STRIP "${text}" text)
  string(REPLACE "\n" "\n    " text "${text}")
  set(${var} "    ${text}\n" PARENT_SCOPE)
endfunction()

# run(<step> COMMAND <cmd>... [INPUT <file>] [OUTPUT <var>] [EXPECT_FAILURE])
# Runs the command; a non-zero exit (or, with EXPECT_FAILURE, a zero one)
# stops the test with the step, the command line, stdout and stderr. OUTPUT
# receives stdout and stderr concatenated.
function(run step)
  cmake_parse_arguments(R "EXPECT_FAILURE" "INPUT;OUTPUT" "COMMAND" ${ARGN})
  set(extra)
  if(R_INPUT)
    set(extra INPUT_FILE "${R_INPUT}")
  endif()
  execute_process(COMMAND ${R_COMMAND} ${extra}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN R_COMMAND " " cmdline)
  set(report "  command: ${cmdline}\n")
  if(R_INPUT)
    file(READ "${R_INPUT}" input_text)
    string(APPEND report "  stdin:   ${input_text}\n")
  endif()
  indent(out_text "${out}")
  indent(err_text "${err}")
  string(APPEND report "  exit:    ${rc}\n  stdout:\n${out_text}  stderr:\n${err_text}")
  if(R_EXPECT_FAILURE)
    if("${rc}" STREQUAL "0")
      message(FATAL_ERROR "out_of_tree: ${step}: expected a failure, but it succeeded\n${report}")
    endif()
  elseif(NOT "${rc}" STREQUAL "0")
    message(FATAL_ERROR "out_of_tree: ${step}: failed\n${report}")
  endif()
  if(R_OUTPUT)
    set(${R_OUTPUT} "${out}${err}" PARENT_SCOPE)
  endif()
  message(STATUS "ok: ${step}")
endfunction()

# expect_listed_ok(<step> <list output> <name>): `list` printed a row for
# <name> whose status column says ok.
function(expect_listed_ok step text name)
  string(REPLACE "\n" ";" lines "${text}")
  foreach(line IN LISTS lines)
    if(line MATCHES "(^|[ \t])${name}([ \t]|$)")
      if(line MATCHES "(^|[ \t])ok([ \t]|$)" AND NOT line MATCHES "broken")
        message(STATUS "ok: ${step}: ${name} is listed ok")
        return()
      endif()
      indent(all "${text}")
      message(FATAL_ERROR "out_of_tree: ${step}: ${name} is listed but not ok:\n    ${line}\n  full output:\n${all}")
    endif()
  endforeach()
  indent(all "${text}")
  message(FATAL_ERROR "out_of_tree: ${step}: ${name} is not listed at all\n  full output:\n${all}")
endfunction()

# expect_contains(<step> <text> <substring>...)
function(expect_contains step text)
  foreach(s IN LISTS ARGN)
    string(FIND "${text}" "${s}" at)
    if(at EQUAL -1)
      indent(all "${text}")
      message(FATAL_ERROR "out_of_tree: ${step}: expected the output to contain \"${s}\"\n  output:\n${all}")
    endif()
  endforeach()
endfunction()

# check_quantize(<step> HOST <exe> PLUGINS <dir> NAME <format>
#                INPUTS <x>... EXPECT <hex-float>... [ARGS <option>...])
# Feeds INPUTS on stdin to `quantize` and compares its lines with EXPECT.
set(case_counter 0)
function(check_quantize step)
  cmake_parse_arguments(Q "" "HOST;PLUGINS;NAME" "INPUTS;EXPECT;ARGS" ${ARGN})
  list(LENGTH Q_INPUTS n_in)
  list(LENGTH Q_EXPECT n_exp)
  if(NOT n_in EQUAL n_exp)
    message(FATAL_ERROR "out_of_tree: ${step}: test bug: ${n_in} inputs but ${n_exp} expected values")
  endif()
  math(EXPR counter "${case_counter} + 1")
  set(case_counter ${counter} PARENT_SCOPE)
  set(input_file "${WORK}/input_${counter}.txt")
  list(JOIN Q_INPUTS " " input_text)
  file(WRITE "${input_file}" "${input_text}\n")
  execute_process(COMMAND "${Q_HOST}" --plugins "${Q_PLUGINS}" quantize "${Q_NAME}" ${Q_ARGS}
    INPUT_FILE "${input_file}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN Q_ARGS " " args_text)
  set(cmdline "${Q_HOST} --plugins ${Q_PLUGINS} quantize ${Q_NAME} ${args_text} < ${input_file}")
  indent(out_text "${out}")
  indent(err_text "${err}")
  if(NOT "${rc}" STREQUAL "0")
    message(FATAL_ERROR "out_of_tree: ${step}: quantize failed (exit ${rc})\n  command: ${cmdline}\n  stdout:\n${out_text}  stderr:\n${err_text}")
  endif()
  string(STRIP "${out}" out)
  string(REGEX REPLACE "[ \t\r]*\n[ \t\r]*" ";" got "${out}")
  list(LENGTH got n_got)
  set(table "")
  set(bad FALSE)
  foreach(i RANGE 0 ${n_in})
    if(i EQUAL n_in)
      break()
    endif()
    list(GET Q_INPUTS ${i} x)
    list(GET Q_EXPECT ${i} want)
    set(have "<missing>")
    if(i LESS n_got)
      list(GET got ${i} have)
    endif()
    set(mark "  ")
    if(NOT have STREQUAL want)
      set(mark "!!")
      set(bad TRUE)
    endif()
    string(APPEND table "  ${mark} ${x} -> ${have}   (expected ${want})\n")
  endforeach()
  if(NOT n_got EQUAL n_in)
    set(bad TRUE)
    string(APPEND table "  !! ${n_got} output lines for ${n_in} inputs\n")
  endif()
  if(bad)
    message(FATAL_ERROR "out_of_tree: ${step}: wrong quantized values (!! marks each mismatch)\n  command: ${cmdline}\n${table}  stderr:\n${err_text}")
  endif()
  message(STATUS "ok: ${step} (${n_in} values)")
endfunction()

# configure_and_build(<example> [SOURCE <dir>]): a standalone project (under
# docs/examples unless SOURCE says where) that may see AltGrad only through
# the installed prefix.
function(configure_and_build example)
  cmake_parse_arguments(C "" "SOURCE" "" ${ARGN})
  set(src "${SOURCE_DIR}/docs/examples/${example}")
  if(C_SOURCE)
    set(src "${C_SOURCE}")
  endif()
  set(bin "${WORK}/${example}-build")
  set(args -S "${src}" -B "${bin}" "-DCMAKE_PREFIX_PATH=${PREFIX}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
    # Keep find_package from the user/system package registries: only the prefix counts.
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  if(GENERATOR)
    list(APPEND args -G "${GENERATOR}")
  endif()
  if(CXX_COMPILER)
    list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
  endif()
  if(CONFIG)
    list(APPEND args "-DCMAKE_BUILD_TYPE=${CONFIG}")
  endif()
  run("${example}: configure against the installed SDK" COMMAND "${CMAKE_COMMAND}" ${args})

  # Where did find_package(AltGrad) look? It must be the prefix.
  file(STRINGS "${bin}/CMakeCache.txt" dir_line REGEX "^AltGrad_DIR:")
  string(REGEX REPLACE "^AltGrad_DIR:[A-Z]*=" "" altgrad_dir "${dir_line}")
  get_filename_component(altgrad_dir "${altgrad_dir}" REALPATH)
  get_filename_component(real_prefix "${PREFIX}" REALPATH)
  string(FIND "${altgrad_dir}" "${real_prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "out_of_tree: ${example}: find_package(AltGrad) used ${altgrad_dir}, not the installed prefix ${real_prefix}")
  endif()

  run("${example}: build" COMMAND "${CMAKE_COMMAND}" --build "${bin}" ${config_args})

  # The compile must have used the installed headers, not the repository's.
  if(EXISTS "${bin}/compile_commands.json")
    file(READ "${bin}/compile_commands.json" commands)
    string(FIND "${commands}" "${SOURCE_DIR}/sdk" at)
    if(NOT at EQUAL -1)
      indent(all "${commands}")
      message(FATAL_ERROR "out_of_tree: ${example}: a compile command uses ${SOURCE_DIR}/sdk instead of the installed headers:\n${all}")
    endif()
  endif()
  foreach(f "plugins/${example}/libaltgrad_${example}.so" "plugins/${example}/manifest.toml")
    if(NOT EXISTS "${bin}/${f}")
      message(FATAL_ERROR "out_of_tree: ${example}: the build did not produce ${bin}/${f}")
    endif()
  endforeach()
endfunction()

# ---------------------------------------------------------------------------
# 1. Install.
run("install the build tree into ${PREFIX}"
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args})

set(installed_host "${PREFIX}/bin/altgrad-host")
file(GLOB installed_plugin_dirs LIST_DIRECTORIES true
  "${PREFIX}/lib/altgrad/plugins" "${PREFIX}/lib64/altgrad/plugins" "${PREFIX}/lib/*/altgrad/plugins")
if(NOT EXISTS "${installed_host}")
  message(FATAL_ERROR "out_of_tree: install did not put the host at ${installed_host}")
endif()
if(NOT installed_plugin_dirs)
  message(FATAL_ERROR "out_of_tree: install did not create <prefix>/lib/altgrad/plugins (looked under ${PREFIX})")
endif()
list(GET installed_plugin_dirs 0 installed_plugins)
foreach(f include/altgrad/altgrad.h include/altgrad/sdk/format_plugin.hpp include/altgrad/sdk/codebook.hpp)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "out_of_tree: install did not put the SDK header ${PREFIX}/${f}")
  endif()
endforeach()

# ---------------------------------------------------------------------------
# 2. The installed host and the installed bundled plugins.
run("installed host lists the installed plugins"
  COMMAND "${installed_host}" --plugins "${installed_plugins}" list OUTPUT listing)
expect_listed_ok("installed host" "${listing}" e5m2)
# Without --plugins (and no ALTGRAD_PLUGINS) the installed host finds PREFIX/lib/altgrad/plugins.
run("installed host without --plugins uses the installed plugins"
  COMMAND "${CMAKE_COMMAND}" -E env --unset=ALTGRAD_PLUGINS "${installed_host}" list OUTPUT listing)
expect_listed_ok("installed host without --plugins" "${listing}" e4m3)
foreach(f nf4/nf4.cpp nf4/CMakeLists.txt exmy_param/exmy_param.cpp)
  if(NOT EXISTS "${PREFIX}/share/doc/altgrad/examples/${f}")
    message(FATAL_ERROR "out_of_tree: install did not put the example ${PREFIX}/share/doc/altgrad/examples/${f}")
  endif()
endforeach()
check_quantize("installed host quantizes e5m2" HOST "${installed_host}" PLUGINS "${installed_plugins}" NAME e5m2
  INPUTS 1 3.3 57344 100000
  EXPECT 0x1p+0 0x1.cp+1 0x1.cp+15 0x1.cp+15)

# ---------------------------------------------------------------------------
# 3. NF4: a codebook format, built from the page's own text.
run("nf4: the files docs/writing-a-plugin.md shows"
  COMMAND /usr/bin/python3 "${SOURCE_DIR}/tests/docs/doc_files.py" "${SOURCE_DIR}/docs/writing-a-plugin.md"
    "${WORK}/nf4-doc")
foreach(f CMakeLists.txt manifest.toml nf4.cpp)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${WORK}/nf4-doc/${f}" "${SOURCE_DIR}/docs/examples/nf4/${f}"
    RESULT_VARIABLE differs)
  if(differs)
    message(FATAL_ERROR "out_of_tree: nf4: docs/examples/nf4/${f} is not what docs/writing-a-plugin.md shows "
      "(${WORK}/nf4-doc/${f}): make them the same")
  endif()
endforeach()
configure_and_build(nf4 SOURCE "${WORK}/nf4-doc")
set(nf4_plugins "${WORK}/nf4-build/plugins")
run("nf4: list" COMMAND "${HOST}" --plugins "${nf4_plugins}" list OUTPUT listing)
expect_listed_ok("nf4: list" "${listing}" nf4)
# Its identity is written once, in manifest.toml: altgrad_add_plugin put the
# manifest's description into the library (the source names only make_nf4),
# and the library beside a manifest of another version is refused, naming the check.
file(STRINGS "${nf4_plugins}/nf4/libaltgrad_nf4.so" nf4_strings
  REGEX "QLoRA NormalFloat4: 16 values in \\[-1, 1\\], codes 0..15 ascending, one zero, no Inf or NaN")
if(NOT nf4_strings)
  message(FATAL_ERROR "out_of_tree: nf4: the library does not hold its manifest's description")
endif()
file(MAKE_DIRECTORY "${WORK}/nf4-other/nf4")
file(COPY "${nf4_plugins}/nf4/libaltgrad_nf4.so" DESTINATION "${WORK}/nf4-other/nf4")
file(READ "${nf4_plugins}/nf4/manifest.toml" nf4_manifest)
string(REPLACE "version = \"1.0.0\"" "version = \"1.0.1\"" nf4_manifest "${nf4_manifest}")
file(WRITE "${WORK}/nf4-other/nf4/manifest.toml" "${nf4_manifest}")
run("nf4: its library beside another manifest"
  COMMAND "${HOST}" --plugins "${WORK}/nf4-other" list OUTPUT listing)
expect_contains("nf4: its library beside another manifest" "${listing}" broken)
run("nf4: ... is refused, naming the check" COMMAND "${HOST}" --plugins "${WORK}/nf4-other" describe nf4
  OUTPUT refused EXPECT_FAILURE)
expect_contains("nf4: ... is refused" "${refused}"
  "descriptor: library says version 1.0.0, manifest says 1.0.1")
run("nf4: describe --table" COMMAND "${HOST}" --plugins "${nf4_plugins}" describe nf4 --table OUTPUT described)
# Every table value, as %a of the float32 literal.
expect_contains("nf4: describe --table" "${described}" nf4
  -0x1p+0 -0x1.647362p-1 -0x1.0cd66p-1 -0x1.94654p-2 -0x1.23449ap-2 -0x1.7a6a7ep-3 -0x1.74f0e2p-4 0x0p+0
  0x1.45f5fep-4 0x1.4995c6p-3 0x1.f809bap-3 0x1.5a0674p-2 0x1.c3497p-2 0x1.200f56p-1 0x1.722766p-1 0x1p+0)

# NF4 table (QLoRA appendix E), code: value (%a of the float32):
#   0 -1 (-0x1p+0)                    8 0.07958029955625534 (0x1.45f5fep-4)
#   1 -0.6961928009986877 (-0x1.647362p-1)  9 0.16093020141124725 (0x1.4995c6p-3)
#   2 -0.5250730514526367 (-0x1.0cd66p-1)  10 0.24611230194568634 (0x1.f809bap-3)
#   3 -0.39491748809814453 (-0x1.94654p-2) 11 0.33791524171829224 (0x1.5a0674p-2)
#   4 -0.28444138169288635 (-0x1.23449ap-2) 12 0.44070982933044434 (0x1.c3497p-2)
#   5 -0.18477343022823334 (-0x1.7a6a7ep-3) 13 0.5626170039176941 (0x1.200f56p-1)
#   6 -0.09105003625154495 (-0x1.74f0e2p-4) 14 0.7229568362236023 (0x1.722766p-1)
#   7 0 (0x0p+0)                      15 1 (0x1p+0)
# Each input's two neighbours and their midpoint decide (no input is near a tie):
#   1.5    beyond 1: saturates                            -> 1
#   0.9    (0.72296, 1], mid 0.86148                       -> 1
#   0.5    (0.44071, 0.56262), mid 0.50166                 -> 0.44071
#   -0.3   (-0.39492, -0.28444), mid -0.33968              -> -0.28444
#   -2     beyond -1: saturates                           -> -1
#   0.04   (0, 0.07958), mid 0.03979                       -> 0.07958
#   0.03   same interval, below the mid                    -> 0
#   -0.05  (-0.09105, 0), mid -0.04553                     -> -0.09105
#   -0.01  rounds to zero; NF4 has one zero                -> +0
#   0.2    (0.16093, 0.24611), mid 0.20352                 -> 0.16093
#   0.7    (0.56262, 0.72296), mid 0.64279                 -> 0.72296
#   -0.75  (-1, -0.69619), mid -0.84810                    -> -0.69619
check_quantize("nf4: quantize (defaults: nearest, saturate)" HOST "${HOST}" PLUGINS "${nf4_plugins}" NAME nf4
  INPUTS 0      1.5    0.9    0.5            -0.3            -2      0.04           0.03   -0.05           -0.01  0.2            0.7            -0.75          1      nan
  EXPECT 0x0p+0 0x1p+0 0x1p+0 0x1.c3497p-2   -0x1.23449ap-2  -0x1p+0 0x1.45f5fep-4  0x0p+0 -0x1.74f0e2p-4  0x0p+0 0x1.4995c6p-3  0x1.722766p-1  -0x1.647362p-1 0x1p+0 nan)
# No Inf and no NaN code: overflow saturates under the non-finite mode too.
check_quantize("nf4: quantize --overflow nonfinite" HOST "${HOST}" PLUGINS "${nf4_plugins}" NAME nf4
  ARGS --overflow nonfinite
  INPUTS 1.5    -3      inf    0.9
  EXPECT 0x1p+0 -0x1p+0 0x1p+0 0x1p+0)
# Scaling: x -> q(x*s)/s with s = 0.25 (an absmax of 4 maps onto 1):
#   4 -> q(1) = 1 -> 4;  2 -> q(0.5) = 0.44071 -> 1.76284;  8 -> q(2) = 1 (saturated) -> 4.
check_quantize("nf4: quantize --scale 0.25" HOST "${HOST}" PLUGINS "${nf4_plugins}" NAME nf4
  ARGS --scale 0.25
  INPUTS 4      2                8
  EXPECT 0x1p+2 0x1.c3497p+0     0x1p+2)

# ---------------------------------------------------------------------------
# 4. exmy_param: a parameterised ExMy format.
configure_and_build(exmy_param)
set(exmy_plugins "${WORK}/exmy_param-build/plugins")
run("exmy_param: list" COMMAND "${HOST}" --plugins "${exmy_plugins}" list OUTPUT listing)
expect_listed_ok("exmy_param: list" "${listing}" exmy_param)
run("exmy_param: describe" COMMAND "${HOST}" --plugins "${exmy_plugins}" describe exmy_param OUTPUT described)
expect_contains("exmy_param: describe" "${described}" exponent_bits mantissa_bits bias specials
  0x1.ep+7)  # the defaults, an IEEE-style E4M3: max 1.875 * 2^7 = 240
set(e5m2_params --param exponent_bits=5 --param mantissa_bits=2 --param bias=15)
run("exmy_param: describe as E5M2"
  COMMAND "${HOST}" --plugins "${exmy_plugins}" describe exmy_param ${e5m2_params} OUTPUT described)
expect_contains("exmy_param: describe as E5M2" "${described}"
  0x1.cp+15 0x1p-14 0x1p-16)  # max 57344, min normal 2^-14, min subnormal 2^-16

# OCP E5M2 (bias 15): grid steps are 2^(e-17) for exponent e, subnormals k * 2^-16.
#   1         exact                                              0x1p+0
#   3.3       [2,4) step 0.5: 3.0 | 3.5, 3.3 nearer 3.5           0x1.cp+1
#   0.1       1.6 * 2^-4, step 2^-6: 1.5 | 1.75 -> 0.09375        0x1.8p-4
#   1e-5      0.655 * 2^-16 (subnormal) -> 2^-16                  0x1p-16
#   5e-6      0.328 * 2^-16 -> +0                                 0x0p+0
#   -5e-6     -> -0 (E5M2 has signed zeros)                       -0x0p+0
#   -0        -0                                                  -0x0p+0
#   60000     above max 57344, below the tie 61440: rounds to max 0x1.cp+15
#   61440     the tie between 57344 (0x7B, odd) and 65536: goes up, overflows, saturates
#   100000    overflows, saturates                                0x1.cp+15
#   -3.75     tie 3.5 (odd) | 4 (even)                            -0x1p+2
#   1e-4      1.638 * 2^-14, step 2^-16: 1.5 | 1.75 -> 1.75       0x1.cp-14
#   -inf      saturates                                           -0x1.cp+15
#   nan       nan                                                 nan
set(e5m2_inputs 1      3.3      0.1      1e-5    5e-6   -5e-6   -0      60000     61440     100000    -3.75   1e-4      -inf       nan)
set(e5m2_expect 0x1p+0 0x1.cp+1 0x1.8p-4 0x1p-16 0x0p+0 -0x0p+0 -0x0p+0 0x1.cp+15 0x1.cp+15 0x1.cp+15 -0x1p+2 0x1.cp-14 -0x1.cp+15 nan)
check_quantize("exmy_param as E5M2: saturate" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  ARGS ${e5m2_params} --rounding nearest --overflow saturate
  INPUTS ${e5m2_inputs} EXPECT ${e5m2_expect})
# The bundled e5m2 must agree value for value.
check_quantize("bundled e5m2 agrees" HOST "${installed_host}" PLUGINS "${installed_plugins}" NAME e5m2
  ARGS --rounding nearest --overflow saturate
  INPUTS ${e5m2_inputs} EXPECT ${e5m2_expect})
check_quantize("exmy_param as E5M2: nonfinite" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  ARGS ${e5m2_params} --overflow nonfinite
  INPUTS 60000     61440 -1e6 inf 57344
  EXPECT 0x1.cp+15 inf   -inf inf 0x1.cp+15)
check_quantize("exmy_param as E5M2: toward-zero" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  ARGS ${e5m2_params} --rounding toward-zero --overflow nonfinite
  INPUTS 3.9      1e6       inf -1.99e-5
  EXPECT 0x1.cp+1 0x1.cp+15 inf -0x1p-16)
# The defaults: IEEE-style E4M3, max 240; 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2.
check_quantize("exmy_param: defaults" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  INPUTS 1000     0.3
  EXPECT 0x1.ep+7 0x1.4p-2)
# OCP MX E2M1 (specials=finite): 0 0.5 1 1.5 2 3 4 6, no Inf or NaN: saturates
# even under nonfinite; 5 ties 4 (even code) | 6; 0.25 ties 0 | 0.5 -> 0.
check_quantize("exmy_param as E2M1" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  ARGS --param exponent_bits=2 --param mantissa_bits=1 --param bias=1 --param specials=finite --overflow nonfinite
  INPUTS 5      100      0.25   0.26   -2.6
  EXPECT 0x1p+2 0x1.8p+2 0x0p+0 0x1p-1 -0x1.8p+1)
# P3109 binary8p7 (= the bundled e1m6): multiples of 1/64 up to 126/64, one zero.
check_quantize("exmy_param as P3109 E1M6" HOST "${HOST}" PLUGINS "${exmy_plugins}" NAME exmy_param
  ARGS --param exponent_bits=1 --param mantissa_bits=6 --param bias=1 --param specials=p3109
  INPUTS 2.5       -0.001 0.5    0.3
  EXPECT 0x1.f8p+0 0x0p+0 0x1p-1 0x1.3p-2)

# Rejected parameters: by the host (range, choices) and by the plugin (combination).
run("exmy_param: exponent_bits out of range is refused"
  COMMAND "${HOST}" --plugins "${exmy_plugins}" quantize exmy_param --param exponent_bits=9
  INPUT "${WORK}/input_1.txt" OUTPUT refused EXPECT_FAILURE)
expect_contains("exmy_param: exponent_bits out of range" "${refused}" exponent_bits)
run("exmy_param: unknown specials is refused"
  COMMAND "${HOST}" --plugins "${exmy_plugins}" quantize exmy_param --param specials=posit
  INPUT "${WORK}/input_1.txt" OUTPUT refused EXPECT_FAILURE)
expect_contains("exmy_param: unknown specials" "${refused}" specials)
run("exmy_param: an impossible combination is refused by create()"
  COMMAND "${HOST}" --plugins "${exmy_plugins}" quantize exmy_param --param exponent_bits=8 --param bias=200
  INPUT "${WORK}/input_1.txt" OUTPUT refused EXPECT_FAILURE)
expect_contains("exmy_param: impossible combination" "${refused}" "bias=200")

# ---------------------------------------------------------------------------
# 5. new-plugin: a project of each kind, as scaffolded, builds against the
#    installed SDK and passes every conformance check.
# A tiny model on a small corpus: a few seconds per run.
set(corpus "")
foreach(i RANGE 60)
  string(APPEND corpus "the quick brown fox jumps over the lazy dog ${i}. pack my box with five dozen jugs.\n")
endforeach()
file(WRITE "${WORK}/corpus.txt" "${corpus}")
file(WRITE "${WORK}/tiny.toml" "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
  "[data]\npath = \"${WORK}/corpus.txt\"\n[training]\nmax_steps = 4\nbatch_size = 4\neval_interval = 2\n"
  "eval_batches = 1\nlog_interval = 1\nthreads = 1\n[quantization]\ndiagnostic_interval = 1\n")
set(use_format quantization.weight_format)
set(use_diagnostic diagnostics.plugins)
set(use_intervention stability.interventions)
foreach(kind format diagnostic intervention)
  set(name "scaffold_${kind}")
  run("new-plugin ${kind}"
    COMMAND "${installed_host}" new-plugin ${name} --kind ${kind} --dir "${WORK}/scaffolds")
  configure_and_build(${name} SOURCE "${WORK}/scaffolds/${name}")
  run("${name}: conformance" COMMAND "${installed_host}" --plugins "${WORK}/${name}-build/plugins"
    conformance --brief --seed 18 ${name} OUTPUT conformed)
  expect_contains("${name}: conformance" "${conformed}" "${name}")
  # Its README's last two steps: install beside the bundled plugins, train with it.
  file(READ "${WORK}/scaffolds/${name}/README.md" readme)
  expect_contains("${name}: README" "${readme}" "cmake --install build --prefix PREFIX"
    "PREFIX/bin/altgrad-host run CONFIG.toml --set ${use_${kind}}=${name}")
  run("${name}: install into the prefix" COMMAND "${CMAKE_COMMAND}" --install "${WORK}/${name}-build" --prefix "${PREFIX}")
  if(HOST_TRAINS)
    run("${name}: a run trains with it"
      COMMAND "${CMAKE_COMMAND}" -E env --unset=ALTGRAD_PLUGINS "${installed_host}" run "${WORK}/tiny.toml"
        --set "${use_${kind}}=${name}" --out "${WORK}/${name}-run")
    file(READ "${WORK}/${name}-run/config.toml" resolved)
    expect_contains("${name}: the run's config" "${resolved}" "\"${name}\"")
  endif()
endforeach()

# ---------------------------------------------------------------------------
# 6. docs/writing-a-plugin.md, end to end: every command it shows with its
#    output runs against the installed SDK and host (PATH, $HOME/altgrad),
#    with the examples built above as nf4/build and exmy_param/build, and
#    prints what the page shows (tests/docs/doc_commands.py).
file(MAKE_DIRECTORY "${WORK}/home")
file(CREATE_LINK "${PREFIX}" "${WORK}/home/altgrad" SYMBOLIC)
run("docs/writing-a-plugin.md: the commands it shows print what it shows"
  COMMAND /usr/bin/python3 "${SOURCE_DIR}/tests/docs/doc_commands.py" --workdir "${WORK}/docs"
    --link "nf4/build=${WORK}/nf4-build" --link "exmy_param/build=${WORK}/exmy_param-build"
    --path "${PREFIX}/bin" --env "HOME=${WORK}/home" --env ALTGRAD_PLUGINS=
    "${SOURCE_DIR}/docs/writing-a-plugin.md")

message(STATUS "out_of_tree: all checks passed")
