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

find_package(spdlog QUIET CONFIG)
if(NOT spdlog_FOUND)
  kproxy_missing("spdlog" "libspdlog-dev")
endif()

find_package(prometheus-cpp QUIET CONFIG)
if(NOT prometheus-cpp_FOUND)
  kproxy_missing("prometheus-cpp" "prometheus-cpp-dev")
endif()

find_package(yaml-cpp QUIET CONFIG)
if(NOT yaml-cpp_FOUND)
  kproxy_missing("yaml-cpp" "libyaml-cpp-dev")
endif()

find_package(OpenSSL QUIET)
if(NOT OpenSSL_FOUND)
  kproxy_missing("OpenSSL" "libssl-dev")
endif()

find_package(nlohmann_json QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  kproxy_missing("nlohmann-json" "nlohmann-json3-dev")
endif()

if(KPROXY_TESTS)
  find_package(doctest QUIET CONFIG)
  if(NOT doctest_FOUND)
    kproxy_missing("doctest" "doctest-dev")
  endif()
endif()

find_package(Threads REQUIRED)
