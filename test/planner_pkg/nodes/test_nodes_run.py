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
        before = []  # anything the interpreter printed first (a warning on a loaded machine, say)
        while (line := proc.stdout.readline().decode()) and line.strip() != "importing":
            before.append(line)
        assert line.strip() == "importing", "".join(before)
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


def test_a_supervisor_stopping_a_node_at_once_waits_for_its_handler_then_it_exits_0():
    """Stopped right after it was started, a node used to get the SIGINT while the interpreter itself
    was still starting (site-packages, the -m imports: 0.4 s and more under load), before run.py's
    handler: a KeyboardInterrupt traceback. The supervisor now interrupts only after the child said,
    on its ready pipe, that the handler is in place; whatever the load, the stop is clean."""
    from planner_pkg.nodes import bringup

    spec = bringup.TRAJ_SERVER
    cmd = [sys.executable, "-m", "planner_pkg.nodes.run", spec.module, "--ros-args", "-p", "use_sim_time:=true"]
    for _ in range(3):
        logs = []
        sup = bringup.Supervisor({spec.name: cmd}, {spec.name: spec}, env=None, stop_timeout_s=60.0,
                                 log=logs.append)
        sup.start_all()
        sup.stop()  # at once: the child is still in the interpreter's start-up
        assert sup.procs[spec.name].returncode == 0, logs
        assert not sup._ready_pipes  # every pipe closed
        assert not any("interrupting anyway" in line for line in logs), logs


def test_a_supervisor_does_not_wait_for_a_child_that_announces_nothing():
    """A command that is not nodes.run never writes on the pipe; its exit (EOF) ends the wait."""
    from planner_pkg.nodes import bringup

    spec = bringup.TRAJ_SERVER
    sup = bringup.Supervisor({spec.name: [sys.executable, "-c", "pass"]}, {spec.name: spec}, env=None,
                             stop_timeout_s=60.0, log=lambda line: None)
    sup.start_all()
    sup.procs[spec.name].wait(timeout=60)
    sup.stop()
    assert sup.procs[spec.name].returncode == 0 and not sup._ready_pipes
