# SPDX-License-Identifier: Apache-2.0
"""The build backend of the kvq-client distribution (PEP 517 and PEP 660), in the standard
library only, so ``pip install clients/python`` works with any Python 3.9 or later, offline,
with or without build isolation: it needs no setuptools and no wheel package, and it writes
nothing into the source folder (each archive goes straight into the folder pip names).

The metadata is read from pyproject.toml's ``[project]`` table. The package is the folder
``kvq`` beside this one's parent, every ``.py`` file and ``py.typed`` in it.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "kvq"
_SDIST_FILES = ["pyproject.toml", "README.md", "LICENSE", "build_backend/kvq_build.py"]


def read_project(path=None):
    """pyproject.toml's [project] table: by tomllib where there is one (3.11+), else by a
    reader of the subset this file uses (strings, lists of strings, and tables of them)."""
    with open(path or os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib
    except ImportError:
        return _read_toml_subset(raw.decode("utf-8"))["project"]
    return tomllib.loads(raw.decode("utf-8"))["project"]


_STRING = r'"((?:[^"\\]|\\.)*)"'


def _read_toml_subset(text):
    doc, table = {}, None
    lines = iter(text.splitlines())
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        header = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
        if header:
            table = doc
            for part in header.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        key, _, value = (s.strip() for s in line.partition("="))
        if value.startswith("[") and not value.endswith("]"):
            for more in lines:
                value += " " + more.strip()
                if more.strip().endswith("]"):
                    break
        table[key.strip('"')] = _toml_value(value)
    return doc


def _toml_value(value):
    if value.startswith("["):
        return [_unescape(s) for s in re.findall(_STRING, value)]
    if value.startswith("{"):
        return {k: _unescape(v) for k, v in re.findall(r"([A-Za-z0-9_-]+)\s*=\s*" + _STRING, value)}
    m = re.fullmatch(_STRING, value)
    if not m:
        raise ValueError("pyproject.toml: a value this reader does not take: %r" % value)
    return _unescape(m.group(1))


def _unescape(s):
    return s.replace('\\"', '"').replace("\\\\", "\\")


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"],
             "Version: " + project["version"], "Summary: " + project["description"],
             "License: " + project["license"],
             "Requires-Python: " + project["requires-python"]]
    lines += ["Classifier: " + c for c in project.get("classifiers", [])]
    lines += ["Project-URL: %s, %s" % kv for kv in project.get("urls", {}).items()]
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _package_files():
    folder = os.path.join(ROOT, PACKAGE)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".py") or n == "py.typed")
    return [(PACKAGE + "/" + n, os.path.join(folder, n)) for n in names]


class _Wheel:
    """A wheel being written: each file recorded in RECORD with its hash."""

    def __init__(self, path, dist_info):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.dist_info = dist_info
        self.record = []

    def add(self, name, data):
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append("%s,sha256=%s,%d" % (name, digest, len(data)))

    def close(self):
        name = self.dist_info + "/RECORD"
        self.record.append(name + ",,")
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _write_wheel(wheel_directory, editable):
    project = read_project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    dist_info = base + ".dist-info"
    filename = base + "-py3-none-any.whl"
    wheel = _Wheel(os.path.join(wheel_directory, filename), dist_info)
    if editable:
        wheel.add(_dist_name(project) + ".pth", (ROOT + "\n").encode("utf-8"))
    else:
        for name, path in _package_files():
            wheel.add(name, _read(path))
    wheel.add(dist_info + "/METADATA", _metadata(project))
    wheel.add(dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: kvq_build\n"
              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    wheel.add(dist_info + "/LICENSE", _read(os.path.join(ROOT, "LICENSE")))
    wheel.close()
    return filename


# The PEP 517 / PEP 660 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = read_project()
    dist_info = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "wb") as f:
        f.write(_metadata(project))
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_sdist(sdist_directory, config_settings=None):
    project = read_project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    files = [(n, os.path.join(ROOT, n)) for n in _SDIST_FILES] + _package_files()
    files.append(("PKG-INFO", None))
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, source in files:
            data = _metadata(project) if source is None else _read(source)
            info = tarfile.TarInfo(base + "/" + name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return base + ".tar.gz"
