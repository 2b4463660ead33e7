"""What `colcon build` / `pip install` put into share/planner_pkg: every launch file, every
config file (worlds, policy configs, the systemd unit) and the docs the YAML comments point to.
Checked statically from setup.py's data_files globs, so a new config folder cannot be forgotten."""
import ast
import glob
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _installed_patterns():
    """(destination, glob pattern) of every ``(dest, _files(pattern))`` entry in setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "data_files":
            for entry in node.value.elts:
                dest, files = entry.elts
                if isinstance(files, ast.Call) and getattr(files.func, "id", "") == "_files":
                    out.append((ast.unparse(dest), files.args[0].value))
    return out


def _installed_files():
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return {p for _, pattern in _installed_patterns() for p in glob.glob(pattern) if os.path.isfile(p)}
    finally:
        os.chdir(cwd)


def test_every_launch_config_and_doc_file_is_installed():
    installed = _installed_files()
    shipped = [p.relative_to(ROOT).as_posix() for folder in ("launch", "config", "docs")
               for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert shipped, "no files found: wrong ROOT?"
    missing = sorted(set(shipped) - installed)
    assert not missing, f"setup.py data_files does not install {missing}"


def test_each_folder_lands_in_the_same_folder_under_share():
    for dest, pattern in _installed_patterns():
        folder = os.path.dirname(pattern)
        if folder:
            assert dest.replace(" ", "").endswith(f"'/{folder}'"), f"{pattern} is installed to {dest}"
