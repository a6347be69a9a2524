# altgrad_add_plugin(NAME <name> SOURCES <src>... MANIFEST <manifest.toml>
#                    [OUTPUT_DIR <dir>] [INSTALL_DIR <dir>] [CUDA])
#
# Builds lib altgrad_<name>.so into <OUTPUT_DIR>/<name>/ beside a copy of the
# manifest, ready for `altgrad-host --plugins <OUTPUT_DIR>`. Only the entry
# symbol is exported (a version script), and undefined symbols fail the link
# rather than the load. With INSTALL_DIR, `cmake --install` puts the pair in
# <INSTALL_DIR>/<name>/.
#
# The plugin's identity is the manifest's: when CMake configures, the name,
# version and description of its [plugin] table (each on a line of its own,
# `key = "value"`, a basic or literal TOML string, a comment after it allowed)
# become macros of a header generated for the plugin's sources, which the SDK
# includes (altgrad/sdk/export.hpp), so the short forms of the plugin macros,
# e.g. ALTGRAD_FORMAT_PLUGIN(make), need no strings of their own:
#   ALTGRAD_MANIFEST_NAME            "e4m3"
#   ALTGRAD_MANIFEST_VERSION_MAJOR   1   (and _MINOR, _PATCH)
#   ALTGRAD_MANIFEST_DESCRIPTION     "OCP FP8 E4M3FN: ..."
# A value it cannot turn into a C string (a key missing or given twice, a
# multi-line string, \u0000, an unknown escape, a version not MAJOR.MINOR.PATCH)
# stops the configure with an error naming the manifest and the key. Editing
# the manifest configures again.
#
# CUDA: for a format plugin whose class has kernel() (see format_plugin.hpp),
# compile SOURCES with nvcc so that it also takes CUDA device buffers. Takes
# effect only where the project has enabled the CUDA language
# (enable_language(CUDA)); elsewhere the plugin is built for the host alone.
# The CUDA runtime is linked statically (CMake's default), so the library
# needs only the NVIDIA driver at run time, and none on a machine without GPU.
# _altgrad_manifest_fail(<manifest> <key> <what>): the configure error.
function(_altgrad_manifest_fail manifest key what)
  message(FATAL_ERROR "altgrad_add_plugin: ${manifest}: key 'plugin.${key}': ${what}")
endfunction()

# _altgrad_utf8_hex(<code point> <out>): the UTF-8 bytes of a code point, as hex.
function(_altgrad_utf8_hex cp out)
  if(cp LESS 128)
    set(exprs "${cp}")
  elseif(cp LESS 2048)
    set(exprs "0xC0 | (${cp} >> 6)" "0x80 | (${cp} & 0x3F)")
  elseif(cp LESS 65536)
    set(exprs "0xE0 | (${cp} >> 12)" "0x80 | ((${cp} >> 6) & 0x3F)" "0x80 | (${cp} & 0x3F)")
  else()
    set(exprs "0xF0 | (${cp} >> 18)" "0x80 | ((${cp} >> 12) & 0x3F)" "0x80 | ((${cp} >> 6) & 0x3F)"
      "0x80 | (${cp} & 0x3F)")
  endif()
  set(hex "")
  foreach(e IN LISTS exprs)
    math(EXPR b "0x100 | (${e})" OUTPUT_FORMAT HEXADECIMAL)  # 0x1NN: always two digits after the 1
    string(SUBSTRING "${b}" 3 2 b)
    string(APPEND hex "${b}")
  endforeach()
  string(TOLOWER "${hex}" hex)
  set(${out} "${hex}" PARENT_SCOPE)
endfunction()

# _altgrad_escape_hex(<manifest> <key> <hex> <pos> <out_bytes> <out_pos>): the
# escape of a basic string whose letter (after the backslash) starts at hex
# offset <pos>: its bytes, and the offset after it.
function(_altgrad_escape_hex manifest key hex pos out_bytes out_pos)
  string(LENGTH "${hex}" len)
  string(SUBSTRING "${hex}" ${pos} 2 e)
  math(EXPR pos "${pos} + 2")
  # \b \t \n \f \r \" \\ (by the letter's byte)
  set(simple_62 08)
  set(simple_74 09)
  set(simple_6e 0a)
  set(simple_66 0c)
  set(simple_72 0d)
  set(simple_22 22)
  set(simple_5c 5c)
  if(DEFINED simple_${e})
    set(${out_bytes} "${simple_${e}}" PARENT_SCOPE)
    set(${out_pos} ${pos} PARENT_SCOPE)
    return()
  endif()
  if(NOT e STREQUAL "75" AND NOT e STREQUAL "55")
    math(EXPR ev "0x${e}")
    string(ASCII ${ev} ech)
    _altgrad_manifest_fail("${manifest}" "${key}" "the escape \\${ech} is not one TOML defines")
  endif()
  set(digits 4)  # \uXXXX, \UXXXXXXXX
  if(e STREQUAL "55")
    set(digits 8)
  endif()
  math(EXPR end "${pos} + 2 * ${digits}")
  set(code "")
  if(NOT end GREATER len)
    math(EXPR count "2 * ${digits}")
    string(SUBSTRING "${hex}" ${pos} ${count} code_hex)
    foreach(i RANGE 0 ${count} 2)
      if(i LESS count)
        string(SUBSTRING "${code_hex}" ${i} 2 cb)
        math(EXPR cv "0x${cb}")
        string(ASCII ${cv} ch)
        string(APPEND code "${ch}")
      endif()
    endforeach()
  endif()
  if(NOT code MATCHES "^[0-9A-Fa-f]+$")
    _altgrad_manifest_fail("${manifest}" "${key}" "a \\u escape needs 4 hex digits, a \\U escape 8")
  endif()
  math(EXPR cp "0x${code}")
  if(cp EQUAL 0)
    _altgrad_manifest_fail("${manifest}" "${key}" "\\u0000 (NUL) cannot be in a C string")
  endif()
  if(cp GREATER 1114111 OR (cp GREATER_EQUAL 55296 AND cp LESS_EQUAL 57343))
    _altgrad_manifest_fail("${manifest}" "${key}" "the escape for U+${code} is not a Unicode scalar value")
  endif()
  _altgrad_utf8_hex(${cp} utf8)
  set(${out_bytes} "${utf8}" PARENT_SCOPE)
  set(${out_pos} ${end} PARENT_SCOPE)
endfunction()

# _altgrad_toml_string_hex(<manifest> <key> <raw> <out>): the bytes (hex) of
# the TOML string that begins `raw` (the text after `key =`), which may end in
# a comment. Basic strings ("...", escapes \b \t \n \f \r \" \\ \uXXXX
# \UXXXXXXXX) and literal strings ('...'); anything else is refused.
function(_altgrad_toml_string_hex manifest key raw out)
  if(raw MATCHES "^(\"\"\"|''')")
    _altgrad_manifest_fail("${manifest}" "${key}"
      "a multi-line string cannot be read into the plugin's sources: write the value on one line")
  endif()
  string(HEX "${raw}" hex)
  string(LENGTH "${hex}" len)
  set(quote "")
  if(len GREATER 0)
    string(SUBSTRING "${hex}" 0 2 quote)
  endif()
  if(NOT quote STREQUAL "22" AND NOT quote STREQUAL "27")
    _altgrad_manifest_fail("${manifest}" "${key}"
      "expected a string in quotes on the key's line, got: ${raw}")
  endif()
  set(bytes "")
  set(pos 2)
  set(closed FALSE)
  while(pos LESS len)
    string(SUBSTRING "${hex}" ${pos} 2 b)
    math(EXPR pos "${pos} + 2")
    if(b STREQUAL quote)
      set(closed TRUE)
      break()
    endif()
    math(EXPR v "0x${b}")
    if((v LESS 32 AND NOT v EQUAL 9) OR v EQUAL 127)
      _altgrad_manifest_fail("${manifest}" "${key}" "a control character (byte ${v}) in the string")
    endif()
    if(quote STREQUAL "22" AND b STREQUAL "5c" AND pos LESS len)
      _altgrad_escape_hex("${manifest}" "${key}" "${hex}" ${pos} b pos)
    endif()
    string(APPEND bytes "${b}")
  endwhile()
  if(NOT closed)
    _altgrad_manifest_fail("${manifest}" "${key}" "the string does not end on its line")
  endif()
  math(EXPR offset "${pos} / 2")
  string(SUBSTRING "${raw}" ${offset} -1 rest)
  if(NOT rest MATCHES "^[ \t]*(#.*)?$")
    _altgrad_manifest_fail("${manifest}" "${key}" "unexpected text after the string: ${raw}")
  endif()
  set(${out} "${bytes}" PARENT_SCOPE)
endfunction()

# _altgrad_c_literal(<hex bytes> <out>): a C string literal of those bytes:
# printable ASCII as itself (" and \ escaped), every other byte (and ?, which
# C's trigraphs would read) in octal.
function(_altgrad_c_literal hex out)
  set(text "\"")
  string(LENGTH "${hex}" len)
  set(pos 0)
  while(pos LESS len)
    string(SUBSTRING "${hex}" ${pos} 2 b)
    math(EXPR pos "${pos} + 2")
    math(EXPR v "0x${b}")
    if(v EQUAL 34 OR v EQUAL 92)
      string(ASCII ${v} ch)
      string(APPEND text "\\${ch}")
    elseif(v GREATER_EQUAL 32 AND v LESS 127 AND NOT v EQUAL 63)
      string(ASCII ${v} ch)
      string(APPEND text "${ch}")
    else()
      math(EXPR d2 "${v} / 64")
      math(EXPR d1 "(${v} / 8) % 8")
      math(EXPR d0 "${v} % 8")
      string(APPEND text "\\${d2}${d1}${d0}")
    endif()
  endwhile()
  set(${out} "${text}\"" PARENT_SCOPE)
endfunction()

# _altgrad_manifest_value(<manifest> <section> <key> <out>): the text after
# `key =` in the [plugin] table's text, which must hold the key once.
function(_altgrad_manifest_value manifest section key out)
  set(line_re "\n[ \t]*${key}[ \t]*=[ \t]*([^\n]*)")
  if(NOT section MATCHES "${line_re}")
    _altgrad_manifest_fail("${manifest}" "${key}"
      "missing: altgrad_add_plugin reads it from a line `${key} = \"...\"` of the [plugin] table")
  endif()
  set(raw "${CMAKE_MATCH_1}")
  string(FIND "${section}" "${CMAKE_MATCH_0}" at)
  string(LENGTH "${CMAKE_MATCH_0}" length)
  math(EXPR after "${at} + ${length}")
  string(SUBSTRING "${section}" ${after} -1 rest)
  if(rest MATCHES "\n[ \t]*${key}[ \t]*=")
    _altgrad_manifest_fail("${manifest}" "${key}" "given twice")
  endif()
  string(REGEX REPLACE "[ \t]+$" "" raw "${raw}")
  set(${out} "${raw}" PARENT_SCOPE)
endfunction()

# _altgrad_manifest_identity(<manifest> <header>): writes <header>, which
# defines the ALTGRAD_MANIFEST_* macros from the manifest's [plugin] table
# (see above); rewritten only when its text changes.
function(_altgrad_manifest_identity manifest header)
  file(READ "${manifest}" text)
  string(REPLACE "\r\n" "\n" text "\n${text}")
  if(NOT text MATCHES "\n[ \t]*\\[[ \t]*plugin[ \t]*\\][ \t]*(#[^\n]*)?\n(.*)$")
    message(FATAL_ERROR "altgrad_add_plugin: ${manifest}: no [plugin] table (a line `[plugin]`)")
  endif()
  set(section "\n${CMAKE_MATCH_2}")
  string(REGEX REPLACE "\n[ \t]*\\[.*$" "" section "${section}")  # up to the next table

  _altgrad_manifest_value("${manifest}" "${section}" name raw)
  _altgrad_toml_string_hex("${manifest}" name "${raw}" name_hex)
  _altgrad_c_literal("${name_hex}" name_c)
  _altgrad_manifest_value("${manifest}" "${section}" description raw)
  _altgrad_toml_string_hex("${manifest}" description "${raw}" description_hex)
  _altgrad_c_literal("${description_hex}" description_c)

  _altgrad_manifest_value("${manifest}" "${section}" version raw)
  if(NOT raw MATCHES "^\"([0-9]+)\\.([0-9]+)\\.([0-9]+)\"[ \t]*(#.*)?$")
    _altgrad_manifest_fail("${manifest}" version "expected a version like \"1.2.3\", got: ${raw}")
  endif()
  set(parts ${CMAKE_MATCH_1} ${CMAKE_MATCH_2} ${CMAKE_MATCH_3})
  set(version "")
  foreach(part IN LISTS parts)
    string(LENGTH "${part}" n)
    if(n GREATER 9)
      _altgrad_manifest_fail("${manifest}" version "a part of more than 9 digits: ${raw}")
    endif()
    string(REGEX REPLACE "^0+([0-9])" "\\1" part "${part}")  # 010 is ten, not C's octal eight
    list(APPEND version ${part})
  endforeach()
  list(GET version 0 major)
  list(GET version 1 minor)
  list(GET version 2 patch)

  string(CONCAT content
    "/* Generated by altgrad_add_plugin from ${manifest}: edit the manifest, not this file. */\n"
    "#ifndef ALTGRAD_PLUGIN_IDENTITY_H\n#define ALTGRAD_PLUGIN_IDENTITY_H\n"
    "#define ALTGRAD_MANIFEST_NAME ${name_c}\n"
    "#define ALTGRAD_MANIFEST_VERSION_MAJOR ${major}\n"
    "#define ALTGRAD_MANIFEST_VERSION_MINOR ${minor}\n"
    "#define ALTGRAD_MANIFEST_VERSION_PATCH ${patch}\n"
    "#define ALTGRAD_MANIFEST_DESCRIPTION ${description_c}\n"
    "#endif\n")
  set(old "")
  if(EXISTS "${header}")
    file(READ "${header}" old)
  endif()
  if(NOT old STREQUAL content)
    file(WRITE "${header}" "${content}")
  endif()
endfunction()

function(altgrad_add_plugin)
  cmake_parse_arguments(ARG "CUDA" "NAME;MANIFEST;OUTPUT_DIR;INSTALL_DIR" "SOURCES" ${ARGN})
  if(NOT ARG_NAME OR NOT ARG_SOURCES OR NOT ARG_MANIFEST)
    message(FATAL_ERROR "altgrad_add_plugin: NAME, SOURCES and MANIFEST are required")
  endif()
  if(NOT ARG_OUTPUT_DIR)
    if(ALTGRAD_PLUGIN_OUTPUT_DIR)
      set(ARG_OUTPUT_DIR "${ALTGRAD_PLUGIN_OUTPUT_DIR}")
    else()
      set(ARG_OUTPUT_DIR "${CMAKE_BINARY_DIR}/plugins")
    endif()
  endif()
  set(target "altgrad_plugin_${ARG_NAME}")
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(ARG_CUDA AND "CUDA" IN_LIST languages)
    set_source_files_properties(${ARG_SOURCES} PROPERTIES LANGUAGE CUDA)
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE AltGrad::sdk)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "altgrad_${ARG_NAME}"
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIR}/${ARG_NAME}"
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Export the entry symbol and nothing else, not even the std:: template
  # instances that default visibility would leak.
  set(version_script "${CMAKE_CURRENT_BINARY_DIR}/altgrad_plugin_exports.map")
  if(NOT EXISTS "${version_script}")
    file(WRITE "${version_script}" "{\n  global: altgrad_plugin_entry;\n  local: *;\n};\n")
  endif()
  target_link_options(${target} PRIVATE "LINKER:--no-undefined" "LINKER:--version-script=${version_script}")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${version_script}")
  get_filename_component(manifest "${ARG_MANIFEST}" ABSOLUTE)
  # The identity from the manifest (above); configure again when it changes.
  set(identity_dir "${CMAKE_CURRENT_BINARY_DIR}/altgrad_identity/${ARG_NAME}")
  _altgrad_manifest_identity("${manifest}" "${identity_dir}/altgrad_plugin_identity.h")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
  target_include_directories(${target} PRIVATE "${identity_dir}")
  target_compile_definitions(${target} PRIVATE ALTGRAD_PLUGIN_IDENTITY_FROM_MANIFEST)
  # An edited manifest relinks the plugin, so the copy beside it (POST_BUILD) follows the edit.
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${manifest}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E copy_if_different "${manifest}" "${ARG_OUTPUT_DIR}/${ARG_NAME}/manifest.toml"
    VERBATIM)
  if(ARG_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${ARG_INSTALL_DIR}/${ARG_NAME}")
    install(FILES "${manifest}" DESTINATION "${ARG_INSTALL_DIR}/${ARG_NAME}" RENAME manifest.toml)
  endif()
endfunction()
