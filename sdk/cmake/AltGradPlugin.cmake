# altgrad_add_plugin(NAME <name> SOURCES <src>... MANIFEST <manifest.toml>
#                    [OUTPUT_DIR <dir>] [INSTALL_DIR <dir>] [CUDA])
#
# Builds lib altgrad_<name>.so into <OUTPUT_DIR>/<name>/ beside a copy of the
# manifest, ready for `altgrad-host --plugins <OUTPUT_DIR>`. Only the entry
# symbol is exported (a version script), and undefined symbols fail the link
# rather than the load. With INSTALL_DIR, `cmake --install` puts the pair in
# <INSTALL_DIR>/<name>/.
#
# CUDA: for a format plugin whose class has kernel() (see format_plugin.hpp),
# compile SOURCES with nvcc so that it also takes CUDA device buffers. Takes
# effect only where the project has enabled the CUDA language
# (enable_language(CUDA)); elsewhere the plugin is built for the host alone.
# The CUDA runtime is linked statically (CMake's default), so the library
# needs only the NVIDIA driver at run time, and none on a machine without GPU.
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
