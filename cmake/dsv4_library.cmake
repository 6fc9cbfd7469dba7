# dsv4_library(NAME DEPS ...): one static library per src/ folder, sources globbed from that folder
# (and its subfolders) so parallel work adds files without editing shared build files. Public headers are
# included as "core/status.h", "io/safetensors.h", ... relative to src/.
function(dsv4_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;PUBLIC_DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  if(NOT srcs)
    add_library(dsv4_${name} INTERFACE)
    target_include_directories(dsv4_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(dsv4_${name} INTERFACE ${ARG_DEPS} ${ARG_PUBLIC_DEPS})
    return()
  endif()
  add_library(dsv4_${name} STATIC ${srcs})
  target_include_directories(dsv4_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(dsv4_${name} PUBLIC ${ARG_PUBLIC_DEPS} ${ARG_DEPS})
endfunction()
