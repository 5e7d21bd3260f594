"""Real block devices and small filesystems for the reliability tests: loop-mounted ext4 images
(optionally kept on a loop-mounted XFS whose reflinks snapshot them atomically) and size-limited
tmpfs mounts. They need root; `skip_reason()` says why a test cannot run.
Everything set up is torn down by `Mounts.close()`, which a test calls from tearDown/finally."""
import os
import shutil
import subprocess
import tempfile
import unittest

from kvq_server import KvqServer


def skip_reason(*tools):
    if os.geteuid() != 0:
        return "needs root (mounts loop devices and tmpfs)"
    for tool in ("mount", "umount", "losetup", "mkfs.ext4") + tools:
        if shutil.which(tool) is None:
            return "needs %s" % tool
    return None


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


class Mounts:
    """Mount points and loop devices made by a test, undone in reverse order."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="kvq-rel-")
        self._undo = []

    def path(self, name):
        return os.path.join(self.root, name)

    def ext4_image(self, name, size):
        image = self.path(name)
        run("truncate", "-s", str(size), image)
        run("mkfs.ext4", "-q", "-F", image)
        return image

    def reflink_host(self, name, size):
        """A loop-mounted XFS with reflinks, to hold images that `snapshot` copies."""
        host = self.path(name + ".xfs")
        run("truncate", "-s", str(size), host)
        run("mkfs.xfs", "-q", "-f", "-m", "reflink=1", host)
        return self.mount_image(host, name, fstype="xfs")

    @staticmethod
    def snapshot(image, copy):
        """Copies `image` as it is at one instant: a reflink clone on XFS takes the image's
        locks, so no write to it (the loop device's, for the ext4 inside) lands while the clone
        is made. What the copy holds is exactly what had reached the block device then, as after
        a power cut (of a device with no volatile cache); a plain copy would read early blocks
        before and late blocks after writes made meanwhile, a state no power cut can leave."""
        run("cp", "--reflink=always", image, copy)

    def mount_image(self, image, name, fstype="ext4"):
        """Attaches `image` to a loop device and mounts it (ext4 replays its journal)."""
        mnt = self.path(name)
        os.makedirs(mnt, exist_ok=True)
        dev = run("losetup", "--find", "--show", image)
        self._undo.append(("losetup", "-d", dev))
        run("mount", "-t", fstype, dev, mnt)
        self._undo.append(("umount", "-l", mnt))
        return mnt

    def tmpfs(self, name, size):
        mnt = self.path(name)
        os.makedirs(mnt, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", mnt)
        self._undo.append(("umount", "-l", mnt))
        return mnt

    def unmount_last(self):
        """Undoes the most recent mount and loop device (if the last step was a mount)."""
        while self._undo:
            step = self._undo.pop()
            subprocess.run(step, capture_output=True)
            if step[0] == "losetup":
                return

    def close(self):
        while self._undo:
            subprocess.run(self._undo.pop(), capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


class MountedServersTest(unittest.TestCase):
    """A test that mounts filesystems (self.mounts) and starts servers on them (self.serve),
    all undone in tearDown, whatever happened. TOOLS: commands it needs beyond the mount tools."""

    TOOLS = ()

    def setUp(self):
        reason = skip_reason(*self.TOOLS)
        if reason:
            self.skipTest(reason)
        self.mounts = Mounts()
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.kill()
            s.cleanup()
        self.mounts.close()

    def serve(self, data, durability):
        s = KvqServer(data_dir=data, durability=durability)
        self.servers.append(s)
        return s.start()
