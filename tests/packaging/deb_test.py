"""The Debian package on this machine: build it, install it, run the service, remove it.

Needs root (dpkg, a system user): as anyone else it exits 77, which ctest reports as skipped.
Steps, each a check: CPack builds kvq_*.deb from the build tree; `dpkg -i` installs it (the
binary, the unit, the conffile /etc/kvq/kvq.env, kvq(1), the user kvq, /var/lib/kvq);
`systemd-analyze verify` accepts the installed unit; the unit's ExecStart runs as the unit would
run it, and a job goes through it over HTTP; `dpkg -r` leaves the data directory and the
conffile, `dpkg --purge` the data directory; a reinstall serves the old job again. PID 1 here
need not be systemd, so the test does not `systemctl start` the unit: it reads the installed
unit's User, Environment, EnvironmentFile and ExecStart and runs that command line itself, as
user kvq with no new privileges, expanding ${VAR} and $VAR the way systemd does. The one change:
KVQ_LISTEN is set to 127.0.0.1:0 after the environment file, so the test takes a free port.

Whatever happens, the package is purged at the end, and the user kvq and /var/lib/kvq are
removed if this test created them, so a second run starts as the first did.
"""

import argparse
import glob
import grp
import http.client
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ARGS = None
SKIP = 77
UNIT = "/lib/systemd/system/kvq.service"
ENV_FILE = "/etc/kvq/kvq.env"
DATA = "/var/lib/kvq"


def run(cmd, check=True):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print(p.stdout, end="", flush=True)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d" % (cmd[0], p.returncode))
    return p


def installed():
    p = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "kvq"], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return p.returncode == 0 and p.stdout.strip() not in ("", "un")


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def parse_unit(path):
    """The [Service] settings of a unit file: name -> list of values, in order."""
    settings, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]":
                name, _, value = line.partition("=")
                settings.setdefault(name.strip(), []).append(value.strip())
    return settings


def read_env_file(path):
    """systemd's EnvironmentFile: NAME=value lines, # comments, optional quotes."""
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            name, _, value = line.partition("=")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[name.strip()] = value
    return env


def expand_exec(line, env):
    """systemd's ExecStart expansion: ${VAR} is one word, $VAR splits on whitespace."""
    words = []
    for word in shlex.split(line):
        m = re.fullmatch(r"\$\{(\w+)\}", word)
        if m:
            words.append(env.get(m.group(1), ""))
            continue
        m = re.fullmatch(r"\$(\w+)", word)
        if m:
            words.extend(env.get(m.group(1), "").split())
            continue
        words.append(re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), word))
    return words


class Server:
    """The installed unit's ExecStart, run as its User."""

    def __init__(self):
        unit = parse_unit(UNIT)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        for assignment in unit.get("Environment", []):
            for word in shlex.split(assignment):
                name, _, value = word.partition("=")
                env[name] = value
        for file in unit.get("EnvironmentFile", []):
            optional = file.startswith("-")
            file = file.lstrip("-")
            if os.path.exists(file) or not optional:
                env.update(read_env_file(file))
        env["KVQ_LISTEN"] = "127.0.0.1:0"  # the test's own change: a free port
        env["STATE_DIRECTORY"] = DATA       # what StateDirectory=kvq sets
        user, group = unit["User"][-1], unit["Group"][-1]
        self.argv = expand_exec(unit["ExecStart"][-1], env)
        print("ExecStart, expanded:", self.argv, flush=True)
        self.proc = subprocess.Popen(
            ["setpriv", "--reuid", user, "--regid", group, "--init-groups", "--no-new-privs",
             "--"] + self.argv,
            env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        found = threading.Event()
        self.url = None

        def read():
            for line in self.proc.stdout:  # "listening on" is on stdout
                self.lines.append(line)
                m = re.search(r"listening on http://(\S+)", line)
                if m and not self.url:
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(30) or not self.url:
            self.stop()
            raise AssertionError("kvq serve did not start:\n" + "".join(self.lines))
        self.host, _, port = self.url.rpartition(":")
        self.port = int(port)

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read()
        conn.close()
        return r.status, (json.loads(text) if text else None)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode


class DebTest(unittest.TestCase):
    def test_install_serve_remove(self):
        print("building the packages with CPack", flush=True)
        out = tempfile.mkdtemp(prefix="kvq-deb-")
        self.addCleanup(shutil.rmtree, out, ignore_errors=True)
        run(["cpack", "--config", os.path.join(ARGS.build, "CPackConfig.cmake"), "-B", out])
        debs = glob.glob(os.path.join(out, "kvq_*.deb"))
        self.assertEqual(len(debs), 1, os.listdir(out))
        self.assertEqual(len(glob.glob(os.path.join(out, "kvq-dev_*.deb"))), 1)
        deb = debs[0]
        self.check_lintian(out)
        contents = run(["dpkg-deb", "-c", deb]).stdout
        for path in ["./usr/bin/kvq", "." + UNIT, "." + ENV_FILE, "./usr/share/man/man1/kvq.1.gz"]:
            self.assertIn(path, contents)
        self.assertIn("./usr/share/doc/kvq/copyright", contents)
        maintainer = run(["dpkg-deb", "-f", deb, "Maintainer"]).stdout
        self.assertNotIn("localhost", maintainer)
        control = run(["dpkg-deb", "-f", deb, "Depends"]).stdout
        self.assertIn("adduser", control)
        self.assertIn("libjemalloc2", control)  # found by dpkg-shlibdeps

        if installed():
            print("kvq was installed already (a killed run?): purging it first", flush=True)
            run(["dpkg", "--purge", "kvq"])
        made_user = not user_exists("kvq")
        made_data = not os.path.exists(DATA)
        self.addCleanup(self.clean_up, made_user, made_data)

        run(["dpkg", "-i", deb])
        self.check_installed()
        verify = run(["systemd-analyze", "verify", UNIT]).stdout
        self.assertNotIn("Unknown", verify)
        self.assertNotIn("ignoring", verify)

        job = "pkg-%d-%d" % (os.getpid(), int(time.time()))
        server = Server()
        self.addCleanup(server.stop)
        self.assertEqual(server.argv[:2], ["/usr/bin/kvq", "serve"])
        self.assertIn(DATA, server.argv)
        self.assertEqual(server.call("PUT", "/v1/types/pkgtest", {"timeout": 30})[0], 200)
        self.assertIn(server.call("POST", "/v1/jobs/pkgtest", {"id": job, "data": {"n": 1}})[0],
                      (200, 201))
        status, body = server.call("POST", "/v1/accept/pkgtest", {"timeout": 5, "worker": "deb"})
        self.assertEqual(status, 200, body)
        lock = body["jobs"][0]["lock"]
        status, body = server.call("POST", "/v1/jobs/pkgtest/%s/finish" % job,
                                   {"lock": lock, "result": {"ok": True}})
        self.assertEqual(status, 200, body)
        status, body = server.call("GET", "/v1/jobs/pkgtest/%s" % job)
        self.assertEqual((status, body["state"], body["result"]), (200, "finished", {"ok": True}))
        self.assertEqual(server.stop(), 0, "".join(server.lines))
        owner = pwd.getpwuid(os.stat(os.path.join(DATA, "data.mdb")).st_uid).pw_name
        self.assertEqual(owner, "kvq")

        run(["dpkg", "-r", "kvq"])
        self.assertFalse(os.path.exists("/usr/bin/kvq"))
        self.assertFalse(os.path.exists(UNIT))
        self.assertTrue(os.path.isfile(os.path.join(DATA, "data.mdb")), "data lost on remove")
        self.assertTrue(os.path.isfile(ENV_FILE), "a conffile stays until purge")
        run(["dpkg", "--purge", "kvq"])
        self.assertFalse(os.path.exists(ENV_FILE))
        self.assertTrue(os.path.isfile(os.path.join(DATA, "data.mdb")), "data lost on purge")

        # Reinstalled, the service finds its jobs again.
        run(["dpkg", "-i", deb])
        server = Server()
        self.addCleanup(server.stop)
        status, body = server.call("GET", "/v1/jobs/pkgtest/%s" % job)
        self.assertEqual((status, body["state"]), (200, "finished"))
        self.assertEqual(server.stop(), 0, "".join(server.lines))
        run(["dpkg", "--purge", "kvq"])

    def check_lintian(self, out):
        debs = sorted(glob.glob(os.path.join(out, "*.deb")))
        said = run(["lintian", "--tag-display-limit", "0"] + debs, check=False).stdout
        errors = [line for line in said.splitlines() if line.startswith("E: ")]
        self.assertEqual(errors, [], "lintian found errors:\n" + said)
        self.assertNotIn("extended-description-line-too-long", said)

    def check_installed(self):
        for path in ["/usr/bin/kvq", UNIT, ENV_FILE, "/usr/share/man/man1/kvq.1.gz",
                     "/usr/share/doc/kvq/install.md"]:
            self.assertTrue(os.path.isfile(path), path)
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "kvq"]).stdout
        self.assertIn(ENV_FILE, conffiles)
        user = pwd.getpwnam("kvq")
        self.assertLess(user.pw_uid, 1000, "a system user")
        self.assertIn("nologin", user.pw_shell)
        st = os.stat(DATA)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (user.pw_uid, 0o750))
        st = os.stat(ENV_FILE)
        self.assertEqual((st.st_uid, grp.getgrgid(st.st_gid).gr_name, stat.S_IMODE(st.st_mode)),
                         (0, "kvq", 0o640))
        page = subprocess.run(["man", "-l", "/usr/share/man/man1/kvq.1.gz"], text=True,
                              env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(page.returncode, 0, page.stderr)
        self.assertIn("kvq serve", page.stdout)
        self.assertIn("EXIT STATUS", page.stdout)

    def clean_up(self, made_user, made_data):
        if installed():
            run(["dpkg", "--purge", "kvq"], check=False)
        if made_data:
            shutil.rmtree(DATA, ignore_errors=True)
        if made_user and user_exists("kvq"):
            run(["userdel", "kvq"], check=False)
            try:
                grp.getgrnam("kvq")
                run(["groupdel", "kvq"], check=False)
            except KeyError:
                pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", required=True)
    ARGS, rest = parser.parse_known_args()
    if os.geteuid() != 0:
        print("skipped: installing a Debian package needs root (dpkg -i, a system user)")
        sys.exit(SKIP)
    for tool in ["dpkg", "cpack", "systemd-analyze", "setpriv", "man", "dpkg-shlibdeps", "lintian"]:
        if not shutil.which(tool):
            print("skipped: %s is not installed" % tool)
            sys.exit(SKIP)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
