# identity_test.cmake: altgrad_add_plugin's reading of a manifest's identity.
#
#   cmake -DSOURCE_DIR=<repo> -DWORK=<scratch dir> [-DGENERATOR=...] [-DCXX_COMPILER=...]
#         -P tests/plugin_identity/identity_test.cmake
#
# A tiny project (one source that only includes the generated header, so it
# compiles in a moment; AltGrad::sdk an empty stand-in) is configured and built
# with the repository's AltGradPlugin.cmake:
#   1. a manifest full of TOML escapes gives the header expected here, written
#      out by hand (C string literals: printable ASCII as itself, other bytes
#      in octal);
#   2. editing the manifest's version and building again configures again and
#      the header follows;
#   3. each value that cannot become a C string stops the configure with
#      "altgrad_add_plugin: <manifest>: key 'plugin.<key>': <why>".
cmake_minimum_required(VERSION 3.22)
foreach(var SOURCE_DIR WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "identity_test: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}")
set(project "${WORK}/probe")
set(build "${WORK}/build")
file(MAKE_DIRECTORY "${project}")
file(WRITE "${project}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.22)
project(identity_probe LANGUAGES CXX)
add_library(AltGrad::sdk INTERFACE IMPORTED)
include(\"${SOURCE_DIR}/sdk/cmake/AltGradPlugin.cmake\")
altgrad_add_plugin(NAME probe SOURCES probe.cpp MANIFEST manifest.toml)
")
file(WRITE "${project}/probe.cpp" "#include <altgrad_plugin_identity.h>
static_assert(ALTGRAD_MANIFEST_VERSION_MAJOR >= 0, \"the version is a number\");
extern \"C\" __attribute__((visibility(\"default\"))) const char* altgrad_plugin_entry() {
    return ALTGRAD_MANIFEST_NAME ALTGRAD_MANIFEST_DESCRIPTION;
}
")
set(manifest "${project}/manifest.toml")
set(header "${build}/altgrad_identity/probe/altgrad_plugin_identity.h")
set(args -S "${project}" -B "${build}")
if(GENERATOR)
  list(APPEND args -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()

# write_manifest(<description line> [<name line> <version line>]): the manifest.
function(write_manifest description)
  set(name_line "name = \"probe\"")
  set(version_line "version = \"1.2.4\"")
  if(ARGC GREATER 1)
    set(name_line "${ARGV1}")
    set(version_line "${ARGV2}")
  endif()
  file(WRITE "${manifest}" "# a comment\n[plugin]\nkind = \"format\"\n${name_line}\n${version_line}\n"
    "abi_version = \"1.3\"\nlibrary = \"libaltgrad_probe.so\"\n${description}\n\n[parameters.x]\n"
    "type = \"int\"\ndefault = 1\ndescription = \"not the plugin's\"\n")
endfunction()

function(run what expect)
  execute_process(COMMAND "${CMAKE_COMMAND}" ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(output "${out}${err}" PARENT_SCOPE)
  if(expect STREQUAL "ok" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "identity_test: ${what}: failed (exit ${rc}):\n${out}${err}")
  elseif(expect STREQUAL "fail" AND rc EQUAL 0)
    message(FATAL_ERROR "identity_test: ${what}: succeeded, expected a configure error:\n${out}${err}")
  endif()
endfunction()

function(expect_header what want)
  file(READ "${header}" text)
  string(FIND "${text}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "identity_test: ${what}: the header lacks\n  ${want}\nit is:\n${text}")
  endif()
  message(STATUS "ok: ${what}")
endfunction()

# 1. Escapes, Unicode, comments, a literal string, a leading zero. In TOML:
#    \" \\ \t \u00e9 \U0001F600, raw UTF-8 for U+00B1, then ? # ; $ characters.
write_manifest([=[description = "q\"b\\t\te\u00e9s\U0001F600\u00b1? # ; ${x} @y@"  # after]=]
  [=[name = 'probe'  # a literal string]=] [=[version = "1.020.3"]=])
run("configure the escaped manifest" ok ${args})
run("build it" ok --build "${build}")
expect_header("name" [=[#define ALTGRAD_MANIFEST_NAME "probe"]=])
expect_header("version major" "#define ALTGRAD_MANIFEST_VERSION_MAJOR 1\n")
expect_header("version minor (020 is twenty)" "#define ALTGRAD_MANIFEST_VERSION_MINOR 20\n")
expect_header("version patch" "#define ALTGRAD_MANIFEST_VERSION_PATCH 3\n")
# q " b \ t TAB e é(c3 a9) s 😀(f0 9f 98 80) ±(c2 b1) ?(077) then the rest as is.
string(CONCAT want [=[#define ALTGRAD_MANIFEST_DESCRIPTION "q\"b\\t\011e\303\251s]=]
  [=[\360\237\230\200\302\261\077 # ; ${x} @y@"]=])
expect_header("description" "${want}")

# 2. An edited manifest configures again when the plugin is built.
write_manifest([=[description = "changed"]=])
run("build after editing the manifest" ok --build "${build}")
expect_header("the edited version"
  "#define ALTGRAD_MANIFEST_VERSION_MINOR 2\n#define ALTGRAD_MANIFEST_VERSION_PATCH 4\n")
expect_header("the edited description" [=[#define ALTGRAD_MANIFEST_DESCRIPTION "changed"]=])
expect_header("the edited name" [=[#define ALTGRAD_MANIFEST_NAME "probe"]=])

# 3. Values that cannot become C strings: each a clear configure error.
set(cases
  "description|description = \"\"\"two\nlines\"\"\"|a multi-line string cannot be read"
  "description|description = \"a\\u0000b\"|\\u0000 (NUL) cannot be in a C string"
  "description|description = \"a\\qb\"|the escape \\q is not one TOML defines"
  "description|description = \"a\\u12\"|a \\u escape needs 4 hex digits"
  "description|description = \"\\ud800\"|is not a Unicode scalar value"
  "description|description = \"open|the string does not end on its line"
  "description|description = \"a\" b|unexpected text after the string"
  "description|description = 42|expected a string in quotes"
  "description|# description = \"commented out\"|missing"
  "version|version = \"1.2\"|expected a version like \"1.2.3\""
  "version|version = \"1.2.3456789012\"|a part of more than 9 digits")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 key)
  list(GET parts 1 line)
  list(GET parts 2 why)
  if(key STREQUAL "version")
    write_manifest("description = \"d\"" "name = \"probe\"" "${line}")
  else()
    write_manifest("${line}")
  endif()
  run("${line}" fail ${args})
  string(REPLACE "\n" " " flat "${output}")
  string(REGEX REPLACE "  +" " " flat "${flat}")
  foreach(want "altgrad_add_plugin: ${manifest}: key 'plugin.${key}':" "${why}")
    string(FIND "${flat}" "${want}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "identity_test: ${line}: the error lacks \"${want}\":\n${output}")
    endif()
  endforeach()
  message(STATUS "ok: refused: ${line}")
endforeach()
# A name given twice.
write_manifest("description = \"d\"" "name = \"probe\"\nname = \"again\"" "version = \"1.2.3\"")
run("name given twice" fail ${args})
string(REGEX REPLACE "[ \n]+" " " flat "${output}")
string(FIND "${flat}" "key 'plugin.name': given twice" at)
if(at EQUAL -1)
  message(FATAL_ERROR "identity_test: name given twice: not named:\n${output}")
endif()
message(STATUS "identity_test: all checks passed")
