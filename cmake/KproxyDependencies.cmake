# Finds kproxy's dependencies, all from Debian packages. A missing one stops the configure step
# with the name of the package to install (scripts/setup installs them all).

find_package(PkgConfig QUIET)

macro(kproxy_missing what debian_package)
  message(FATAL_ERROR "kproxy needs ${what}: install the Debian package '${debian_package}' "
                      "(apt-get install ${debian_package}), or run scripts/setup")
endmacro()

if(NOT PkgConfig_FOUND)
  kproxy_missing("pkg-config" "pkg-config")
endif()

pkg_check_modules(LIBUV QUIET IMPORTED_TARGET libuv)
if(NOT LIBUV_FOUND)
  kproxy_missing("libuv" "libuv1-dev")
endif()

# kproxy_require(<find_package name> <Debian package> [find_package options...])
macro(kproxy_require name debian_package)
  find_package(${name} QUIET ${ARGN})
  if(NOT ${name}_FOUND)
    kproxy_missing("${name}" "${debian_package}")
  endif()
endmacro()

kproxy_require(spdlog libspdlog-dev CONFIG)
kproxy_require(prometheus-cpp prometheus-cpp-dev CONFIG)
kproxy_require(yaml-cpp libyaml-cpp-dev CONFIG)
kproxy_require(OpenSSL libssl-dev)
kproxy_require(nlohmann_json nlohmann-json3-dev CONFIG)

if(KPROXY_TESTS)
  kproxy_require(doctest doctest-dev CONFIG)
endif()

find_package(Threads REQUIRED)
