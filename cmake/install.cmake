# What `cmake --install` puts where (included last from the top-level CMakeLists.txt, once every
# target exists). Two components:
#   server  bin/kvq, the man page kvq(1), the systemd unit and its environment file
#   dev     the static libraries, include/kvq/*.h, the CMake package (find_package(kvq):
#           kvq::jobs, kvq::workers, kvq::lmdb, kvq::etcd, kvq::app, and the kvq::kv, kvq::server, kvq::beanstalk and
#           kvq::util they link) and kvq.pc for pkg-config
# docs/install.md is the user's side of this file; cmake/package.cmake turns the server component
# into the Debian package kvq and the dev component into kvq-dev.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The targets an application links, and the ones they link in turn (static libraries carry their
# private dependencies to the final link): export name = the name after kvq::.
set(KVQ_EXPORTED_TARGETS
    kvq_util util kvq_kv kv kvq_kv_lmdb lmdb kvq_etcd_proto etcd_proto kvq_kv_etcd etcd
    kvq_jobs jobs kvq_workers workers kvq_beanstalk beanstalk kvq_server server kvq_app app)

set(kvq_installed_targets)
while(KVQ_EXPORTED_TARGETS)
  list(POP_FRONT KVQ_EXPORTED_TARGETS target export_name)
  list(APPEND kvq_installed_targets ${target})
  # The include paths the src/ CMakeLists give are source- and build-tree paths (include/, the
  # src-roots/ wall, the generated protos): usable only while building. Installed, every target
  # sees <prefix>/include, which holds the public headers and nothing else.
  foreach(property INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(dirs ${target} ${property})
    if(dirs)
      set(wrapped)
      foreach(dir IN LISTS dirs)
        list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      endforeach()
      set_target_properties(${target} PROPERTIES ${property} "${wrapped}")
    endif()
  endforeach()
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # The public headers are C++20 (designated initializers, <concepts>): say so to consumers.
  target_compile_features(${target} INTERFACE cxx_std_20)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
endwhile()

install(TARGETS ${kvq_installed_targets} EXPORT kvqTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvq DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")

# What the exported targets link from outside kvq, and how a consumer finds each: the
# namespace of its imported target (PkgConfig::NAME for pkg-config's), find_dependency's
# arguments, its pkg-config module ("-" when header-only: nothing to link), its Debian package.
# An imported target linked by an exported one and missing here stops the configure, so that
# find_package(kvq), kvq.pc and kvq-dev's Depends stay complete.
set(KVQ_DEPENDENCIES
    "Threads|Threads|-|libc6-dev"
    "OpenSSL|OpenSSL|openssl|libssl-dev"
    "nlohmann_json|nlohmann_json 3.10|-|nlohmann-json3-dev"
    "simdjson|simdjson|simdjson|libsimdjson-dev"
    "protobuf|Protobuf|protobuf|libprotobuf-dev"
    "Boost|Boost 1.74|-|libboost-dev"
    "spdlog|spdlog|spdlog|libspdlog-dev"
    "fmt|fmt|fmt|libfmt-dev"
    "CLI11|CLI11|-|libcli11-dev"
    "PkgConfig::LMDB|lmdb|lmdb|liblmdb-dev"
    "PkgConfig::GRPCPP|grpc++|grpc++|libgrpc++-dev"
    "PkgConfig::JEMALLOC|jemalloc|jemalloc|libjemalloc-dev"
    "absl|absl|absl_time|libabsl-dev")
set(kvq_used)
foreach(target IN LISTS kvq_installed_targets)
  get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
    # kvq's own targets are kvq_*, without "::"; the imported ones (seen here by name only: most
    # are imported in a src/ folder's scope) all have a namespace.
    if(NOT link MATCHES "::")
      continue()
    endif()
    string(REGEX REPLACE "::.*" "" namespace "${link}")
    set(key ${namespace})
    if(namespace STREQUAL "PkgConfig")
      set(key ${link})
    endif()
    set(found FALSE)
    foreach(entry IN LISTS KVQ_DEPENDENCIES)
      string(REPLACE "|" ";" fields "${entry}")
      list(GET fields 0 name)
      if(name STREQUAL key)
        set(found TRUE)
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "cmake/install.cmake: ${target} links ${link}: add its package to "
                          "KVQ_DEPENDENCIES, so that installed consumers find it")
    endif()
    list(APPEND kvq_used ${key})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES kvq_used)
set(KVQ_FIND_DEPENDENCIES "")
set(KVQ_PC_REQUIRES "")
set(KVQ_DEB_DEV_DEPENDS "pkg-config")
foreach(entry IN LISTS KVQ_DEPENDENCIES)
  string(REPLACE "|" ";" fields "${entry}")
  list(GET fields 0 name)
  list(GET fields 1 find)
  list(GET fields 2 module)
  list(GET fields 3 deb)
  if(NOT name IN_LIST kvq_used)
    continue()
  endif()
  if(name MATCHES "^PkgConfig::(.*)")
    string(APPEND KVQ_FIND_DEPENDENCIES "kvq_find_pkg_config(${CMAKE_MATCH_1} ${find})\n")
  else()
    string(APPEND KVQ_FIND_DEPENDENCIES "find_dependency(${find})\n")
  endif()
  if(NOT module STREQUAL "-")
    string(APPEND KVQ_PC_REQUIRES " ${module}")
  endif()
  string(APPEND KVQ_DEB_DEV_DEPENDS ", ${deb}")
endforeach()
string(STRIP "${KVQ_PC_REQUIRES}" KVQ_PC_REQUIRES)

set(kvq_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kvq)
install(EXPORT kvqTargets NAMESPACE kvq:: DESTINATION ${kvq_cmake_dir} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kvqConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kvqConfig.cmake INSTALL_DESTINATION ${kvq_cmake_dir})
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvqConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvqConfig.cmake ${PROJECT_BINARY_DIR}/kvqConfigVersion.cmake
        DESTINATION ${kvq_cmake_dir} COMPONENT dev)

# kvq.pc, relocatable: its prefix is found from where the file is (${pcfiledir}).
set(kvq_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH KVQ_PC_TO_PREFIX /prefix/${kvq_pc_dir} /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/kvq.pc.in ${PROJECT_BINARY_DIR}/kvq.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvq.pc DESTINATION ${kvq_pc_dir} COMPONENT dev)

# The server.
install(TARGETS kvq RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
# The man page compressed, as Debian policy (and man-db) expect; -n keeps the build reproducible.
find_program(KVQ_GZIP gzip REQUIRED)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/kvq.1.gz
                   COMMAND ${KVQ_GZIP} -9nc ${PROJECT_SOURCE_DIR}/packaging/kvq.1 > ${PROJECT_BINARY_DIR}/kvq.1.gz
                   DEPENDS ${PROJECT_SOURCE_DIR}/packaging/kvq.1 VERBATIM)
add_custom_target(kvq_man_page ALL DEPENDS ${PROJECT_BINARY_DIR}/kvq.1.gz)
install(FILES ${PROJECT_BINARY_DIR}/kvq.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT server)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/install.md
              ${PROJECT_SOURCE_DIR}/docs/http-api.md ${PROJECT_SOURCE_DIR}/docs/operations.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT server)
# The unit and its environment file name absolute paths, known only at install time (the Debian
# package installs with the prefix /usr, a source install usually /usr/local): written then. With
# the prefix /usr they go to /lib/systemd/system and /etc/kvq (as GNUInstallDirs does for
# sysconfdir) and the data directory is /var/lib/kvq; under any other prefix P, to
# P/lib/systemd/system, P/etc/kvq and P/var/lib/kvq. file(INSTALL) adds $DESTDIR itself.
install(CODE "set(KVQ_PACKAGING_DIR \"${PROJECT_SOURCE_DIR}/packaging\")
              set(KVQ_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
              set(KVQ_BUILD_DIR \"${PROJECT_BINARY_DIR}\")"
        COMPONENT server)
install(CODE [[
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(KVQ_SYSCONFDIR /etc)
    set(KVQ_STATEDIR /var/lib)
    set(KVQ_UNITDIR /lib/systemd/system)  # where Debian 12's packages put their units
  else()
    set(KVQ_SYSCONFDIR "${CMAKE_INSTALL_PREFIX}/etc")
    set(KVQ_STATEDIR "${CMAKE_INSTALL_PREFIX}/var/lib")
    set(KVQ_UNITDIR "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
  endif()
  set(KVQ_EXECUTABLE "${CMAKE_INSTALL_PREFIX}/${KVQ_BINDIR}/kvq")
  set(KVQ_ENV_FILE "${KVQ_SYSCONFDIR}/kvq/kvq.env")
  set(KVQ_DATA_DIR "${KVQ_STATEDIR}/kvq")
  # One staging folder per destination, so that concurrent installs (the packaging tests) do
  # not write each other's unit.
  string(MD5 destination "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
  set(staging "${KVQ_BUILD_DIR}/packaging-staging/${destination}")
  configure_file("${KVQ_PACKAGING_DIR}/kvq.service.in" "${staging}/kvq.service" @ONLY)
  file(INSTALL DESTINATION "${KVQ_UNITDIR}" TYPE FILE
       FILES "${staging}/kvq.service")
  file(INSTALL DESTINATION "${KVQ_SYSCONFDIR}/kvq" TYPE FILE FILES "${KVQ_PACKAGING_DIR}/kvq.env")
]] COMPONENT server)
