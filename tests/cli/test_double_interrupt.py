"""A double Ctrl-C ends `benchbox run` with the interrupted line and exit 130, never a traceback.

The second SIGINT is sent at a range of moments after the first one's "interrupted" line (while
the CLI exits and torch's exit handlers run), one real `benchbox run` process per moment, so
that the race that used to end in a traceback from an exit handler (or in a kill by SIGINT,
exit -2) is hit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import REPO, loaded

#: seconds between the first interrupt's line and the second SIGINT
GAPS = (0.0, 0.002, 0.005, 0.01, 0.03, 0.07, 0.15)


def _double_interrupt(tmp_path: Path, gap: float) -> tuple[int, str, Path]:
    out = tmp_path / f"r-{gap}.json"
    proc = subprocess.Popen([sys.executable, "-m", "benchbox", "run", "--runner", "torch-eager",
                             "--samples", "40", "--warmup", "1", "--out", str(out)],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = b""
    try:
        while "×".encode() not in err:  # a first result is being reported: sampling is under way
            line = proc.stderr.readline()
            assert line, f"benchbox ended early: {err.decode()[-2000:]}"
            err += line
        proc.send_signal(signal.SIGINT)
        while b"interrupted" not in err.splitlines()[-1]:
            line = proc.stderr.readline()
            if not line:
                break
            err += line
        time.sleep(gap)
        proc.send_signal(signal.SIGINT)
        err += proc.stderr.read()
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, err.decode(errors="replace"), out


def test_a_second_sigint_while_exiting_gives_no_traceback_and_exit_130(tmp_path: Path) -> None:
    seen = []
    for gap in GAPS:
        code, err, out = _double_interrupt(tmp_path, gap)
        # the lines from the first interrupt's on: what a failure shows (the whole tail, not one line)
        lines = err.strip().splitlines()
        start = min((i for i, line in enumerate(lines) if "interrupted" in line), default=len(lines))
        tail = lines[max(start - 2, 0):][-12:]
        seen.append((gap, code, "Traceback" in err, lines[-1][:200] if lines else "", tail))
        assert loaded(out)["interrupted"] is True
    assert all(code == 130 and not tb for _, code, tb, *_ in seen), seen
    assert all(last.startswith("benchbox: interrupted (SIGINT)") for *_, last, _ in seen), seen


#: a Ctrl-C that lands while the command line is being imported, made certain: an import hook
#: raises it as ``benchbox.cli`` is looked up (a real SIGINT there is a matter of milliseconds)
_INTERRUPTED_IMPORT = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "benchbox.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from benchbox.__main__ import entry
entry()
"""


def test_a_ctrl_c_while_the_command_line_loads_is_one_line_and_exit_130() -> None:
    r = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT, "show", "x.json"], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stderr, r.stdout) == (130, "benchbox: interrupted\n", "")
    # the `benchbox` command and `python -m benchbox` both start there
    assert 'benchbox = "benchbox.__main__:entry"' in (REPO / "pyproject.toml").read_text()
