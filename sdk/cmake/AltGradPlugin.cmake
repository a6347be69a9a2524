# altgrad_add_plugin(NAME <name> SOURCES <src>... MANIFEST <manifest.toml>
#                    [OUTPUT_DIR <dir>] [INSTALL_DIR <dir>])
#
# Builds lib altgrad_<name>.so into <OUTPUT_DIR>/<name>/ beside a copy of the
# manifest, ready for `altgrad-host --plugins <OUTPUT_DIR>`. Only the entry
# symbol is exported (a version script), and undefined symbols fail the link
# rather than the load. With INSTALL_DIR, `cmake --install` puts the pair in
# <INSTALL_DIR>/<name>/.
function(altgrad_add_plugin)
  cmake_parse_arguments(ARG "" "NAME;MANIFEST;OUTPUT_DIR;INSTALL_DIR" "SOURCES" ${ARGN})
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
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE AltGrad::sdk)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "altgrad_${ARG_NAME}"
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIR}/${ARG_NAME}"
    CXX_VISIBILITY_PRESET hidden
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
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E copy_if_different "${manifest}" "${ARG_OUTPUT_DIR}/${ARG_NAME}/manifest.toml"
    VERBATIM)
  if(ARG_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${ARG_INSTALL_DIR}/${ARG_NAME}")
    install(FILES "${manifest}" DESTINATION "${ARG_INSTALL_DIR}/${ARG_NAME}" RENAME manifest.toml)
  endif()
endfunction()
