# The layers of proxy/ as CMake libraries whose headers only their dependents can see.
#
# Every library below proxy/ publishes its folder through an include root of its own in the build
# tree (build/include-roots/<target>/proxy/<layer> -> the source folder), and the proxy/ folder
# has no include path of its own: a source can include "proxy/<layer>/x.h" only when its library
# links kproxy_<layer>, directly or through a library below it. An include that climbs a layer
# fails to compile ("No such file or directory"). The order is drawn in docs/architecture.md
# ("Layers"); scripts/check-layers checks the same rule without a build.

# kproxy_include_root(TARGET DIR [INTERFACE]): TARGET's headers are DIR (relative to the top of the
# tree, e.g. proxy/net), included as "DIR/x.h" by TARGET and whatever links it.
function(kproxy_include_root target dir)
  set(root ${CMAKE_BINARY_DIR}/include-roots/${target})
  get_filename_component(parent ${root}/${dir} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${dir})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${root}/${dir} SYMBOLIC)
  endif()
  if(ARGN STREQUAL "INTERFACE")
    target_include_directories(${target} INTERFACE ${root})
  else()
    target_include_directories(${target} PUBLIC ${root})
  endif()
endfunction()

# kproxy_layer(NAME SOURCES... LINKS libs...): the library kproxy_NAME of folder proxy/NAME.
function(kproxy_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;LINKS" ${ARGN})
  if(L_SOURCES)
    add_library(kproxy_${name} STATIC ${L_SOURCES})
    kproxy_include_root(kproxy_${name} proxy/${name})
    target_link_libraries(kproxy_${name} PUBLIC ${L_LINKS})
  else()
    add_library(kproxy_${name} INTERFACE)
    kproxy_include_root(kproxy_${name} proxy/${name} INTERFACE)
    target_link_libraries(kproxy_${name} INTERFACE ${L_LINKS})
  endif()
endfunction()
