"""What the whole suite shares: a ROS 2 domain id no other test on this machine is using.

DDS discovery on loopback sees every participant of a domain on the host, so two tests in one
domain see each other's nodes: a step manifest or an odometry stream from a graph that is not
theirs. A random id per test is not enough when several test runs share the machine (CI beside a
developer's run, a reliability loop beside a fresh-clone run): with 200 ids and a few hundred
ROS tests per run, two concurrent runs collide in some test of most runs (seen: a trajectory
server in one run waited for the step manifest of another run's simulator).

So a test claims its id: an exclusive ``flock`` on ``<tmp>/planner_pkg-ros-domains/<id>.lock``,
held until the test ends (the kernel drops it if the process dies). An id released less than
:data:`QUIET_S` ago, by any run, is not claimed again yet, so the late packets of a graph that was
just stopped reach nobody.
"""
import fcntl
import os
import random
import tempfile
import time
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "planner_pkg-ros-domains"
DOMAIN_IDS = range(1, 201)  # Fast DDS allows 0..232 (port arithmetic); 0 is everyone's default
QUIET_S = 10.0


class RosDomain:
    """One claimed domain id (``id``); :meth:`release` gives it back."""

    def __init__(self, domain_id: int, fd: int):
        self.id, self._fd = domain_id, fd

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, repr(time.time()).encode(), 0)  # when it was let go (read by the next claim)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def claim_ros_domain() -> RosDomain:
    """A domain id that no live test on this machine holds and nobody let go of in the last QUIET_S."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    ids = list(DOMAIN_IDS)
    random.SystemRandom().shuffle(ids)
    for domain_id in ids:
        fd = os.open(LOCK_DIR / f"{domain_id}.lock", os.O_CREAT | os.O_RDWR, 0o666)  # not inherited by children
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a test running now
            os.close(fd)
            continue
        released = os.pread(fd, 32, 0).decode(errors="replace").strip()
        try:
            quiet = time.time() - float(released) >= QUIET_S
        except ValueError:  # never used (empty) or unreadable: free
            quiet = True
        if quiet:
            return RosDomain(domain_id, fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    raise RuntimeError(f"every ROS domain id {DOMAIN_IDS.start}..{DOMAIN_IDS.stop - 1} is in use by a test "
                       f"on this machine (locks in {LOCK_DIR})")
