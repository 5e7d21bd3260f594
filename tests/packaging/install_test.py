"""cmake --install, then an outside project built against the installed kvq.

Installs the build tree (argv: --build DIR --source DIR) into a temporary prefix and checks what
landed there; then builds tests/packaging/consumer with find_package(kvq) (and docs/library.md's
library examples with it), and the same consumer with pkg-config alone, and runs them: each adds
a job on LMDB, accepts it and finishes it (and, with the run's etcd fixture, on etcd too). The
installed files must not point back into the source or build tree.
"""

import argparse
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None


def run(cmd, **kwargs):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kwargs).stdout


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvq-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        env = dict(os.environ)
        env.pop("DESTDIR", None)
        run(["cmake", "--install", ARGS.build, "--prefix", cls.prefix], env=env)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def test_installs_the_binary_libraries_headers_and_packages(self):
        for rel in ["bin/kvq", "include/kvq/jobs.h", "include/kvq/workers.h",
                    "include/kvq/lmdb_store.h", "include/kvq/etcd_store.h",
                    "lib/cmake/kvq/kvqConfig.cmake", "lib/cmake/kvq/kvqConfigVersion.cmake",
                    "lib/cmake/kvq/kvqTargets.cmake", "lib/pkgconfig/kvq.pc",
                    "share/man/man1/kvq.1.gz", "share/doc/kvq/install.md"]:
            self.assertTrue(os.path.isfile(self.path(rel)), rel)
        for lib in ["kvq_jobs", "kvq_workers", "kvq_kv", "kvq_kv_lmdb", "kvq_kv_etcd",
                    "kvq_etcd_proto", "kvq_util", "kvq_beanstalk", "kvq_server", "kvq_app"]:
            self.assertTrue(os.path.isfile(self.path("lib", "lib%s.a" % lib)), lib)
        # Only the public API: no header from src/.
        self.assertEqual(os.listdir(self.path("include")), ["kvq"])
        # `kvq version` says the project's version, as CMakeLists.txt sets it.
        with open(os.path.join(ARGS.source, "CMakeLists.txt")) as f:
            project = re.search(r"project\(kvq VERSION ([0-9.]+)", f.read()).group(1)
        version = run([self.path("bin/kvq"), "version"])
        self.assertEqual(version.strip(), "kvq " + project)

    def test_unit_and_config_name_this_prefix(self):
        with open(self.path("lib/systemd/system/kvq.service")) as f:
            unit = f.read()
        self.assertIn("ExecStart=%s/bin/kvq serve --listen ${KVQ_LISTEN} --data %s/var/lib/kvq"
                      % (self.prefix, self.prefix), unit)
        self.assertIn("EnvironmentFile=-%s/etc/kvq/kvq.env" % self.prefix, unit)
        self.assertTrue(os.path.isfile(self.path("etc/kvq/kvq.env")))

    def test_installed_files_do_not_point_into_the_trees(self):
        for d in [self.path("lib/cmake/kvq"), self.path("lib/pkgconfig")]:
            for name in os.listdir(d):
                with open(os.path.join(d, name)) as f:
                    text = f.read()
                for tree in [os.path.realpath(ARGS.source), os.path.realpath(ARGS.build)]:
                    self.assertNotIn(tree, text, "%s names %s" % (name, tree))

    def run_consumer(self, exe, work, label):
        out = run([exe, "lmdb", os.path.join(work, "data")])
        self.assertIn("lmdb photo-1 finished result=", out)
        self.assertIn('"done"', out)
        etcd_file = os.environ.get("KVQ_TEST_ETCD_FILE")
        if etcd_file and os.path.isfile(etcd_file):
            with open(etcd_file) as f:
                endpoint = f.read().strip()
            out = run([exe, "etcd", endpoint, "kvq-install-test-%d-%s" % (os.getpid(), label)])
            self.assertIn("etcd photo-1 finished", out)
        else:
            print("no etcd fixture ($KVQ_TEST_ETCD_FILE): the etcd run is left out")

    def test_find_package_project_builds_and_runs(self):
        build = os.path.join(self.tmp, "find-package")
        cmd = ["cmake", "-S", os.path.join(ARGS.source, "tests/packaging/consumer"), "-B", build,
               "-DCMAKE_PREFIX_PATH=" + self.prefix,
               "-DKVQ_EXAMPLES=" + os.path.join(ARGS.source, "examples"),
               "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
        run(cmd)
        run(["cmake", "--build", build, "-j2"])
        # Compiled with the installed headers, not the source tree's.
        with open(os.path.join(build, "compile_commands.json")) as f:
            for entry in json.load(f):
                # (-isystem: CMake's way with an imported target's include directory.)
                self.assertIn(self.path("include"), entry["command"])
                self.assertNotIn(os.path.join(os.path.realpath(ARGS.source), "include"),
                                 entry["command"])
        self.run_consumer(os.path.join(build, "consumer"), build, "find-package")
        out = run([os.path.join(build, "library_quickstart"), os.path.join(build, "quickstart")])
        self.assertIn("finished img-17; added order-7 with its order", out)

    def test_pkg_config_project_builds_and_runs(self):
        env = dict(os.environ, PKG_CONFIG_PATH=self.path("lib/pkgconfig"))
        flags = run(["pkg-config", "--cflags", "--libs", "kvq"], env=env).split()
        includes = [os.path.realpath(f[2:]) for f in flags if f.startswith("-I")]
        self.assertIn(os.path.realpath(self.path("include")), includes)
        build = os.path.join(self.tmp, "pkg-config")
        os.makedirs(build)
        exe = os.path.join(build, "consumer")
        cxx = os.environ.get("CXX", "c++")
        run([cxx, "-O1", "-o", exe,
             os.path.join(ARGS.source, "tests/packaging/consumer/consumer.cc")] + flags)
        self.run_consumer(exe, build, "pkg-config")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    parser.add_argument("--source", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
