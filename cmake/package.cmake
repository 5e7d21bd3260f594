# The Debian packages, by CPack (`make package`: build/package/kvq_VERSION_ARCH.deb and
# kvq-dev_VERSION_ARCH.deb):
#   kvq      the server component of cmake/install.cmake: /usr/bin/kvq, kvq(1), the unit
#            /lib/systemd/system/kvq.service, the conffile /etc/kvq/kvq.env, the docs; its
#            maintainer scripts (packaging/debian/) create the system user kvq and /var/lib/kvq
#   kvq-dev  the dev component: static libraries, headers, the CMake package, kvq.pc
# The packages install with the prefix /usr and DESTDIR set (CPACK_SET_DESTDIR), so the install
# rules see CMAKE_INSTALL_PREFIX=/usr and put the config in /etc.
# CPack runs the preinstall target first, which would build everything (the tests too); the
# packages need only what they hold, which `make package` builds (and ctest runs after the whole
# build). cmake --install never builds anything either way.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvq)
set(CPACK_PACKAGE_VENDOR "kvq")
# The Maintainer field, and the contact of the copyright file and the Debian changelog.
set(KVQ_PACKAGE_MAINTAINER "kvq maintainers <maintainers@kvq.dev>"
    CACHE STRING "the Maintainer of the Debian packages: a name and an address")
set(CPACK_PACKAGE_CONTACT "${KVQ_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${KVQ_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable background jobs on LMDB or etcd, over HTTP/JSON")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_SOURCE_DIR}/build/package)
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME kvq)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# The shared libraries the binary links (jemalloc, OpenSSL, gRPC, ...), found by dpkg-shlibdeps;
# adduser for the postinst.
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser")
# Description lines stay under 80 columns (lintian's extended-description-line-too-long).
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "kvq keeps typed background jobs (an id, JSON data, a priority, a schedule)\n\
in an embedded LMDB data directory or an etcd cluster and serves them over\n\
HTTP/JSON: workers accept, heartbeat, finish, fail or snooze jobs; failed jobs\n\
are retried with backoff; stale workers are fenced out. This package holds\n\
kvq serve, the kvq command-line client and a hardened systemd service.")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/prerm ${PROJECT_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME kvq-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What find_package(kvq) and pkg-config --libs kvq find in turn (KVQ_DEPENDENCIES in
# cmake/install.cmake).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${KVQ_DEB_DEV_DEPENDS}")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "The kvq libraries for C++20 programs: jobs and workers on LMDB or etcd\n\
(static libraries, headers, a CMake package for find_package(kvq) and kvq.pc\n\
for pkg-config).")

# Each package's /usr/share/doc/PACKAGE holds the copyright file (Apache-2.0, by reference to
# Debian's common-licenses) and a changelog, as Debian policy asks of every package (12.5, 12.7).
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/copyright
               ${PROJECT_BINARY_DIR}/packaging/copyright @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/packaging/debian/changelog.in
               ${PROJECT_BINARY_DIR}/packaging/changelog @ONLY)
execute_process(COMMAND gzip -9nc ${PROJECT_BINARY_DIR}/packaging/changelog
                OUTPUT_FILE ${PROJECT_BINARY_DIR}/packaging/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
foreach(component server dev)
  string(TOUPPER ${component} upper)
  set(package_doc share/doc/${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
  install(FILES ${PROJECT_BINARY_DIR}/packaging/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.gz
          DESTINATION ${package_doc} COMPONENT ${component})
endforeach()

include(CPack)

if(KVQ_BUILD_TESTS)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/packaging ${PROJECT_BINARY_DIR}/tests/packaging)
endif()
