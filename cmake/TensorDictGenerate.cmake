#[=======================================================================[.rst:
TensorDictGenerate
------------------

Generates typed C++ classes from tdgen schemas (docs/schema-format.md) as part of the build, the
way ``protobuf_generate`` does for .proto files: YAML schema files, or C++ headers of annotated
structs (tdgen's Clang frontend).

.. command:: tensordict_generate

  ::

    tensordict_generate(TARGET <target> [SCHEMAS <yaml files...>] [HEADERS <C++ headers...>]
                        [OUT_DIR <dir>] [IMPORT_DIRS <dirs...>] [PYTHON | PYTHON_BINDINGS])

  ``TARGET``
    An existing target. The generated headers are added to its sources, ``OUT_DIR`` to its
    include path (so ``#include "<stem>.td.h"`` works) and ``TensorDict::runtime`` to its link
    libraries (both PUBLIC, INTERFACE for an interface library).
  ``SCHEMAS``
    Schema files (relative paths are relative to the current source directory). Each one gives
    ``<OUT_DIR>/<stem>.td.h``. A schema imported by another must be listed too (here or in
    another call whose OUT_DIR is on the include path), since a generated header includes the
    headers of its imports.
  ``HEADERS``
    C++ schema headers (structs marked with ``<tensordict/schema.h>``). Each one gives
    ``<OUT_DIR>/<stem>.td.h``. They are parsed with the target's include directories and
    compile definitions (its own and those of what it links), so ``#if`` branches and
    includes resolve as in the real build. The depfile lists every header the parse read:
    editing an included header regenerates. A schema header included by another is listed
    too, like an imported YAML schema.
  ``OUT_DIR``
    Where the headers go; default ``${CMAKE_CURRENT_BINARY_DIR}/tdgen/<target>``.
  ``IMPORT_DIRS``
    Directories tdgen searches for imported schemas after the importing file's directory.

  ``PYTHON``
    ``<target>`` is a Python extension module (a ``MODULE`` library) named ``<target>``: each
    schema also gives ``<OUT_DIR>/<stem>.td.py.h`` (tdgen ``--python``), and a generated
    ``<OUT_DIR>/<target>_module.cpp`` defines the module, binding every class of the schemas
    with their checks (docs/python.md). The target gets the Python module's file name and, when
    this project's build found them, pybind11 and libtorch_python; otherwise link
    ``pybind11::module`` and torch's ``torch_python`` library yourself. The module imports
    ``tensordict_cpp``.
  ``PYTHON_BINDINGS``
    As ``PYTHON``, but the target defines its own ``PYBIND11_MODULE(<target>, m)``, which calls
    ``tensordict::python::init_module(m)`` and then ``tdgen_bind_<stem>(m)`` from
    ``<stem>.td.py.h`` beside its own bindings (examples/python_env does).

  One custom command per schema: its OUTPUT is the header; it DEPENDS on the schema, the
  templates and tdgen, and on the imported schemas (or included headers) through the depfile
  tdgen writes (``--depfile``), so editing a schema or one it imports regenerates the header,
  and only the code including it is recompiled: tdgen leaves an unchanged header untouched,
  and Ninja's ``restat`` (CMake sets it on custom commands) then skips the compile steps.

  The tdgen used is the target ``TensorDict::tdgen``; the templates directory is
  ``TENSORDICT_TDGEN_TEMPLATES_DIR``.
#]=======================================================================]

function(tensordict_generate)
  cmake_parse_arguments(PARSE_ARGV 0 arg "PYTHON;PYTHON_BINDINGS" "TARGET;OUT_DIR" "SCHEMAS;HEADERS;IMPORT_DIRS")
  if(arg_UNPARSED_ARGUMENTS)
    message(SEND_ERROR "Error: tensordict_generate called with unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
    return()
  endif()
  if(NOT arg_TARGET)
    message(SEND_ERROR "Error: tensordict_generate called without TARGET")
    return()
  endif()
  if(NOT TARGET ${arg_TARGET})
    message(SEND_ERROR "Error: tensordict_generate called with TARGET ${arg_TARGET}, which is not a target")
    return()
  endif()
  if(NOT arg_SCHEMAS AND NOT arg_HEADERS)
    message(SEND_ERROR "Error: tensordict_generate called without SCHEMAS or HEADERS")
    return()
  endif()
  if(NOT TARGET TensorDict::tdgen)
    message(SEND_ERROR "Error: tensordict_generate needs the TensorDict::tdgen target (built with TENSORDICT_BUILD_GENERATOR)")
    return()
  endif()
  if(NOT TENSORDICT_TDGEN_TEMPLATES_DIR OR NOT IS_DIRECTORY "${TENSORDICT_TDGEN_TEMPLATES_DIR}")
    message(SEND_ERROR "Error: tensordict_generate: TENSORDICT_TDGEN_TEMPLATES_DIR (${TENSORDICT_TDGEN_TEMPLATES_DIR}) is not a directory")
    return()
  endif()

  # The real executable target behind the alias, so COMMAND and DEPENDS name it directly.
  set(tdgen TensorDict::tdgen)
  get_target_property(aliased TensorDict::tdgen ALIASED_TARGET)
  if(aliased)
    set(tdgen ${aliased})
  endif()

  set(out_dir "${arg_OUT_DIR}")
  if(NOT out_dir)
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/tdgen/${arg_TARGET}")
  elseif(NOT IS_ABSOLUTE "${out_dir}")
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${out_dir}")
  endif()
  set(import_args)
  foreach(dir IN LISTS arg_IMPORT_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND import_args --import-dir "${dir}")
  endforeach()
  file(GLOB templates CONFIGURE_DEPENDS "${TENSORDICT_TDGEN_TEMPLATES_DIR}/*.tmpl")

  # C++ headers are parsed with the target's include directories and definitions (evaluated at
  # generation time, so usage requirements of linked targets count); YAML schemas get the
  # import directories.
  set(includes "$<TARGET_PROPERTY:${arg_TARGET},INCLUDE_DIRECTORIES>")
  set(definitions "$<TARGET_PROPERTY:${arg_TARGET},COMPILE_DEFINITIONS>")
  set(headers)
  set(python_headers)
  set(python_functions)
  foreach(schema IN LISTS arg_SCHEMAS arg_HEADERS)
    set(yaml_args ${import_args})
    set(is_header 0)
    if(schema IN_LIST arg_HEADERS)
      set(yaml_args)
      set(is_header 1)
    endif()
    get_filename_component(schema_abs "${schema}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${schema_abs}" NAME_WLE)
    get_filename_component(schema_name "${schema_abs}" NAME)
    set(header "${out_dir}/${stem}.td.h")
    set(outputs "${header}")
    set(python_args)
    if(arg_PYTHON OR arg_PYTHON_BINDINGS)
      list(APPEND outputs "${out_dir}/${stem}.td.py.h")
      set(python_args --python)
      list(APPEND python_headers "${stem}.td.py.h")
      string(MAKE_C_IDENTIFIER "${stem}" stem_id)
      list(APPEND python_functions "tdgen_bind_${stem_id}")
    endif()
    set(depfile "${CMAKE_CURRENT_BINARY_DIR}/tdgen_deps/${arg_TARGET}/${stem}.td.h.d")
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${tdgen} --out "${out_dir}" --templates "${TENSORDICT_TDGEN_TEMPLATES_DIR}" ${python_args}
              --depfile "${depfile}" ${yaml_args}
              "$<$<AND:${is_header},$<BOOL:${includes}>>:-I$<JOIN:${includes},;-I>>"
              "$<$<AND:${is_header},$<BOOL:${definitions}>>:-D$<JOIN:${definitions},;-D>>"
              "${schema_abs}"
      DEPENDS "${schema_abs}" ${tdgen} ${templates}
      DEPFILE "${depfile}"
      COMMENT "tdgen: generating ${stem}.td.h from ${schema_name}"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    set_source_files_properties(${outputs} PROPERTIES GENERATED TRUE)
    list(APPEND headers ${outputs})
  endforeach()

  if(arg_PYTHON)
    _tensordict_python_module_source(${arg_TARGET} "${out_dir}" "${python_headers}" "${python_functions}")
  endif()
  if(arg_PYTHON OR arg_PYTHON_BINDINGS)
    _tensordict_python_module_target(${arg_TARGET})
  endif()

  get_target_property(type ${arg_TARGET} TYPE)
  set(scope PUBLIC)
  set(source_scope PRIVATE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(scope INTERFACE)
    set(source_scope INTERFACE)
  endif()
  target_sources(${arg_TARGET} ${source_scope} ${headers})
  target_include_directories(${arg_TARGET} ${scope} "${out_dir}")
  target_link_libraries(${arg_TARGET} ${scope} TensorDict::runtime)
endfunction()

# The module source of tensordict_generate(PYTHON): PYBIND11_MODULE(<target>) calling each
# schema's binding function (written only when its content changes, so no rebuild otherwise).
function(_tensordict_python_module_source target out_dir python_headers python_functions)
  set(includes)
  foreach(h IN LISTS python_headers)
    string(APPEND includes "#include \"${h}\"\n")
  endforeach()
  set(calls)
  foreach(f IN LISTS python_functions)
    string(APPEND calls "  ${f}(m);\n")
  endforeach()
  set(source "${out_dir}/${target}_module.cpp")
  file(CONFIGURE OUTPUT "${source}" @ONLY CONTENT
"// Generated by tensordict_generate(PYTHON): the Python module @target@, the classes of its schemas.
#include <pybind11/pybind11.h>

#include <tensordict/python/typed.h>

@includes@
PYBIND11_MODULE(@target@, m) {
  ::tensordict::python::init_module(m);
@calls@}
")
  target_sources(${target} PRIVATE "${source}")
endfunction()

# A Python extension module's file name (<target><extension suffix>) and link libraries.
function(_tensordict_python_module_target target)
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${target})
  if(TENSORDICT_PYTHON_SUFFIX)
    set_target_properties(${target} PROPERTIES SUFFIX "${TENSORDICT_PYTHON_SUFFIX}")
  endif()
  if(TARGET pybind11::module AND TENSORDICT_TORCH_PYTHON)
    target_link_libraries(${target} PRIVATE pybind11::module ${TENSORDICT_TORCH_PYTHON})
  endif()
endfunction()
