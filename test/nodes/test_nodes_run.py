"""planner_pkg.nodes.run: a node started through it ends quietly (exit 0, no traceback) on a
SIGINT that arrives while it is still importing, and it refuses what is not a node module."""
import os
import signal
import subprocess
import sys

from planner_pkg.nodes.run import NODE_MODULES


def test_sigint_while_the_node_imports_exits_0_without_a_traceback():
    # the child holds run.py's handler, says so, then imports the node: a SIGINT sent on that word
    # arrives during the node's imports (rclpy, NumPy, the planner), whatever the machine's load
    code = ("import signal, sys; from planner_pkg.nodes import run; signal.signal(signal.SIGINT, run._exit_quietly); "
            "print('importing', flush=True); sys.argv = ['planner_node', '--ros-args', '-p', 'use_sim_time:=true']; "
            f"sys.exit(run.run({NODE_MODULES['planner_node']!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout.readline().decode().strip() == "importing"
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "ready" not in out, out  # it ended during its imports, before the node was up


def test_refuses_a_module_that_is_not_a_node():
    out = subprocess.run([sys.executable, "-m", "planner_pkg.nodes.run", "os"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "not a node module" in out.stderr
