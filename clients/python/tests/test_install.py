# SPDX-License-Identifier: Apache-2.0
"""The distribution kvq-client: what pip makes of clients/python, with the Python running
these tests (any 3.9 or later), offline, and that the folder is left as it was."""

import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from support import PACKAGE_ROOT, kvq

sys.path.insert(0, os.path.join(PACKAGE_ROOT, "build_backend"))
import kvq_build  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))


def files_under(root):
    found = set()
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.update(os.path.relpath(os.path.join(folder, n), root) for n in names)
    return found


class Distribution(unittest.TestCase):

    def test_pip_installs_the_folder_offline_and_leaves_it_clean(self):
        try:
            import ensurepip  # noqa: F401
        except ImportError:
            self.skipTest("this Python has no ensurepip (Debian: python3-venv)")
        before = files_under(PACKAGE_ROOT)
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
            python = os.path.join(venv, "bin", "python")
            pip = subprocess.run([python, "-m", "pip", "install", "--no-index",
                                  "--disable-pip-version-check", PACKAGE_ROOT],
                                 capture_output=True, text=True, cwd=tmp)
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            probe = ("import importlib.metadata as m, kvq; "
                     "print(m.version('kvq-client'), m.metadata('kvq-client')['License'], "
                     "kvq.__file__.startswith(%r))" % venv)
            out = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                                 cwd=tmp, check=True).stdout.split()
        self.assertEqual(out, [kvq.__version__, "Apache-2.0", "True"])
        self.assertEqual(files_under(PACKAGE_ROOT), before)

    def test_the_wheel_holds_the_package_its_metadata_and_license(self):
        with tempfile.TemporaryDirectory() as tmp:
            name = kvq_build.build_wheel(tmp)
            self.assertEqual(name, "kvq_client-%s-py3-none-any.whl" % kvq.__version__)
            with zipfile.ZipFile(os.path.join(tmp, name)) as whl:
                names = set(whl.namelist())
                meta = whl.read("kvq_client-%s.dist-info/METADATA" % kvq.__version__).decode()
        self.assertLessEqual({"kvq/__init__.py", "kvq/client.py", "kvq/worker.py", "kvq/py.typed",
                              "kvq_client-%s.dist-info/LICENSE" % kvq.__version__}, names)
        self.assertIn("Name: kvq-client\n", meta)
        self.assertIn("License: Apache-2.0\n", meta)
        self.assertIn("Requires-Python: >=3.9\n", meta)

    def test_the_backend_reads_pyproject_as_tomllib_does(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib before Python 3.11")
        with open(os.path.join(PACKAGE_ROOT, "pyproject.toml"), "rb") as f:
            text = f.read().decode()
        self.assertEqual(kvq_build._read_toml_subset(text), tomllib.loads(text))

    def test_the_public_api_is_typed(self):
        import inspect
        import typing
        untyped = []
        for cls in (kvq.Client, kvq.Worker, kvq.Job):
            for name, fn in inspect.getmembers(cls, inspect.isfunction):
                if name.startswith("_") and name != "__init__" or cls is kvq.Job and name == "__init__":
                    continue
                typing.get_type_hints(fn)  # each annotation resolves, on this Python too
                sig = inspect.signature(fn)
                missing = [p for p in list(sig.parameters)[1:]
                           if sig.parameters[p].annotation is inspect.Parameter.empty]
                if missing or sig.return_annotation is inspect.Signature.empty:
                    untyped.append("%s.%s %s" % (cls.__name__, name, missing or "return"))
        self.assertEqual(untyped, [])
        self.assertTrue(os.path.isfile(os.path.join(PACKAGE_ROOT, "kvq", "py.typed")))

    def test_the_version_is_the_packages(self):
        self.assertEqual(kvq_build.read_project()["version"], kvq.__version__)

    def test_the_license_is_the_repositorys(self):
        with open(os.path.join(PACKAGE_ROOT, "LICENSE"), "rb") as mine, \
                open(os.path.join(REPO_ROOT, "LICENSE"), "rb") as root:
            self.assertEqual(mine.read(), root.read())


if __name__ == "__main__":
    unittest.main()
