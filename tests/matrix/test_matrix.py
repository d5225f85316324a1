"""`benchbox matrix`: plans, cell identities, the host registry, and real runs on both executors.

The runs are real: every cell is a `python -m benchbox run` subprocess of a tiny task with
the eager runner and a few samples. One local Ray cluster (2 CPUs) serves the whole module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest

from benchbox.errors import UsageError
from benchbox.matrix import load_plan, parse_plan, run_matrix
from benchbox.matrix.cell import command
from benchbox.matrix.host import (
    HostRegistry,
    cpu_ranges,
    overlap_labels,
    parse_gpu_query,
    pcie_path,
    pcie_relation,
    sysfs_bus_id,
    visible_gpu,
)
from benchbox.store import Store
from tests.support import REPO

ROOT = REPO  # the cells import tests.matrix_tasks from the repository root
SENTIMENT = "examples.sentiment_task:make_task"


@pytest.fixture(autouse=True)
def _own_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells run here register in the test's folder, not in the host's shared one."""
    monkeypatch.setenv("BENCHBOX_MATRIX_DIR", str(tmp_path / "registry"))


def _plan(tmp: Path, text: str, name: str = "plan.toml"):
    p = tmp / name
    p.write_text(text)
    return load_plan(p)


# --- plans -------------------------------------------------------------------------------

def test_plan_expands_the_product_of_its_axes_less_the_exclusions(tmp_path: Path) -> None:
    plan = _plan(tmp_path, """
name = "grid"
[axes]
size = ["tiny", "small"]
dtype = ["float32", "bfloat16"]
runner = ["torch-eager", "torch-compile"]
[[exclude]]
runner = "torch-compile"
dtype = "bfloat16"
""")
    combos = [(c.size, c.dtype, c.runners) for c in plan.cells]
    assert len(combos) == 6 and len(set(combos)) == 6
    assert not any(r == ("torch-compile",) and d == "bfloat16" for _, d, r in combos)
    assert plan.name == "grid" and {c.contracts[0].name for c in plan.cells} == {"public_task_call_wall"}
    assert all(c.device == "cpu" and c.task == "decision" for c in plan.cells)


def test_together_puts_runners_and_contracts_in_one_run(tmp_path: Path) -> None:
    plan = _plan(tmp_path, """
task = "decision"
together = ["runner", "contract"]
[axes]
runner = ["torch-eager", "torch-compile"]
contract = ["public_task_call_wall", "model_io_wall"]
[run]
baseline = "torch-eager"
cases = ["invoice"]
settle_s = 0.25
[runner_options.torch-compile]
mode = "default"
aten_fallbacks = ["layer_norm"]
inductor_options = { max_autotune = false }
""")
    (cell,) = plan.cells
    assert cell.runners == ("torch-eager", "torch-compile")
    assert [c.name for c in cell.contracts] == ["public_task_call_wall", "model_io_wall"]
    argv = command(cell, Path("out.json"), [c.name for c in cell.contracts], {"matrix_cell": "x"})
    # the real `benchbox run` parser takes every flag the cell's command line uses
    from benchbox.cli import _run_config, main

    assert argv[0] == "run"
    parent = click.Context(main, info_name="benchbox", **main.context_settings)  # as `benchbox` makes it
    ctx = main.commands["run"].make_context("run", argv[1:], parent=parent)
    p = ctx.params
    del p["quiet"], p["verbose"]
    cfg = _run_config(**p)  # the configuration `benchbox run` makes of it
    assert cfg.runners == ("torch-eager", "torch-compile")
    assert cfg.contracts == ("public_task_call_wall", "model_io_wall")
    assert cfg.baseline == "torch-eager" and cfg.cases == ("invoice",) and cfg.labels == {"matrix_cell": "x"}
    assert p["alias__torch_compile__aten_fallbacks"] == ("layer_norm",)
    assert p["alias__torch_compile__inductor_options"] == ("max_autotune=false",)
    assert cfg.runner_options == {"torch-compile": {"mode": "default", "aten_fallbacks": ["layer_norm"],
                                                    "inductor_options": {"max_autotune": False}}}
    assert cfg.threads == 1 and cfg.settle_s == 0.25


def test_cell_identity_is_its_declared_configuration_and_revision(tmp_path: Path) -> None:
    contract = tmp_path / "mine.toml"
    base = ('name = "mine"\nversion = 1\ndescription = "%s"\n'
            'stages = ["h2d", "compute", "d2h"]\nclock = "host"\n')
    contract.write_text(base % "first")
    text = '[axes]\ncontract = ["mine.toml"]\n[run]\nsamples = %d\n[resources]\ntimeout_s = %d\n'
    a = _plan(tmp_path, text % (10, 100)).cells[0]
    assert a.identity("r1") == _plan(tmp_path, text % (10, 100)).cells[0].identity("r1")
    assert a.identity("r1") != a.identity("r2")                                # another revision
    assert _plan(tmp_path, text % (11, 100)).cells[0].identity("r1") != a.identity("r1")  # samples
    assert _plan(tmp_path, text % (10, 999)).cells[0].identity("r1") == a.identity("r1")  # timeout
    settle = text.replace("[resources]", "settle_s = %s\n[resources]")
    assert _plan(tmp_path, settle % (10, 0, 100)).cells[0].identity("r1") == a.identity("r1")  # no settle
    assert _plan(tmp_path, settle % (10, 0.5, 100)).cells[0].identity("r1") != a.identity("r1")  # settle
    two = _plan(tmp_path, settle % (10, 2, 100)).cells[0].identity("r1")
    assert two == _plan(tmp_path, settle % (10, 2.0, 100)).cells[0].identity("r1")  # 2 and 2.0: one cell
    contract.write_text(base % "reworded")                                     # description only
    assert _plan(tmp_path, text % (10, 100)).cells[0].identity("r1") == a.identity("r1")
    contract.write_text((base % "first").replace('"d2h"]', '"d2h", "reduce"]'))  # another region
    assert _plan(tmp_path, text % (10, 100)).cells[0].identity("r1") != a.identity("r1")


@pytest.mark.parametrize("text, fragment", [
    ("axes = [", "invalid TOML"),
    ('colour = "red"', "unknown field 'colour' (fields: axes, description,"),
    ('[axes]\nrunner = ["torch-eagre"]', "unknown runner 'torch-eagre'"),
    ('[axes]\ndtype = ["int8"]', "unknown dtype 'int8'"),
    ('[axes]\ndevice = ["cuda:1"]', "'cuda:1' is not cpu or cuda"),
    ('[axes]\ncontract = ["nope"]', "unknown contract"),
    ('[axes]\nsize = []', "axes.size: must not be empty"),
    ('[axes]\nsize = ["tiny", "tiny"]', "'tiny' is listed twice"),
    ('[axes]\nflavour = ["x"]', "unknown axes field 'flavour' (fields: case,"),
    ('[run]\nsamples = 0', "run.samples"),
    ('[run]\nsamples = "many"', "run.samples: is string, not an integer"),
    ('[run]\ntarget_ci = 200', "target_ci"),
    ('[run]\nsettle_s = -1.0', "settle_s must be a finite number of seconds ≥ 0"),
    ('[run]\nsettle_s = "long"', "run.settle_s: is string, not a number"),
    ('[resources]\ncpus = 0', "resources.cpus"),
    ('[run]\nbaseline = "torch-eager"', "needs together"),
    ('[runner_options.tensorrt]\nx = 1', "'tensorrt' is not in axes.runner"),
    ('[runner_options.torch-eager]\nx = [1]', "must be a string, number or boolean"),
    ('[[exclude]]\nsize = "huge"', "'huge' is not in axes.size"),
    ('[axes]\nsize = ["tiny", "small"]\n[[exclude]]\nsize = "small"\ndtype = "float16"', "not in axes.dtype"),
    ('task = "decision"\n[axes]\ntask = ["decision"]', "not both"),
    ('together = ["size"]', "cannot share a run"),
    ('[[exclude]]\nsize = "tiny"', "every cell is excluded"),
    ("a" + ".a" * 4_000 + " = 1", "dotted key with parts over the limit"),
    ("x = " + "[" * 2_000 + "]" * 2_000, "nested levels over the limit"),
])
def test_a_bad_plan_is_refused_in_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "plan.toml").write_text(text)
    with pytest.raises(UsageError) as e:
        load_plan(tmp_path / "plan.toml")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_matrix_cli_refuses_bad_input_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text('[axes]\nrunner = ["nope"]\n')
    cases = [["matrix", str(tmp_path / "missing.toml"), "--store", str(tmp_path / "s")],
             ["matrix", str(tmp_path / "plan.toml"), "--store", str(tmp_path / "s")]]
    (tmp_path / "ok.toml").write_text(f'task = "{SENTIMENT}"\n[axes]\nrunner = ["torch-eager"]\n')
    cases.append(["matrix", str(tmp_path / "ok.toml"), "--store", str(tmp_path / "s"),
                  "--executor", "ray", "--ray-address", "127.0.0.1:1"])
    for args in cases:
        r = subprocess.run([sys.executable, "-m", "benchbox", *args], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2, r.stderr
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("benchbox: error:")]
        assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "no such plan" in subprocess.run(
        [sys.executable, "-m", "benchbox", *cases[0]], capture_output=True, text=True).stderr


def test_parse_plan_takes_a_parsed_table() -> None:
    plan = parse_plan({"axes": {"runner": ["torch-eager"], "case": ["invoice", "outage"]}})
    assert [c.cases for c in plan.cells] == [("invoice",), ("outage",)]


# --- the host: CPUs, GPUs, PCIe ---------------------------------------------------------------

def test_registry_gives_concurrent_cells_disjoint_cpus_then_shares_the_least_held(tmp_path: Path) -> None:
    reg = HostRegistry(tmp_path)
    n = len(os.sched_getaffinity(0))
    a = reg.claim("a" * 64, 1, True, None)
    b = reg.claim("b" * 64, n - 1, True, None) if n > 1 else None
    c = reg.claim("c" * 64, 1, True, None)  # every CPU is held now: it must share one
    assert len(a.cpus) == 1 and len(a.running_at_start) == 0
    if b is not None:
        assert set(a.cpus).isdisjoint(b.cpus) and len(b.running_at_start) == 1
    assert len(c.running_at_start) == (2 if b else 1)
    labels_c = overlap_labels(c, reg.release(c), None)
    assert labels_c["matrix_cpus_shared"] == "true"
    assert labels_c["matrix_overlapping_cells"] == str(2 if b else 1)
    if b is not None:
        labels_b = overlap_labels(b, reg.release(b), None)
        assert labels_b["matrix_overlapping_cell_ids"] == ",".join(["aaaaaaaaaaaa", "cccccccccccc"])
    reg.release(a)
    d = reg.claim("d" * 64, 1, True, None)  # every earlier cell ended: nothing ran beside it
    assert d.running_at_start == []
    assert overlap_labels(d, reg.release(d), None)["matrix_overlapping_cells"] == "0"


def test_registry_frees_the_cpus_of_a_cell_whose_process_was_killed(tmp_path: Path) -> None:
    code = ("import sys, time; from pathlib import Path; from benchbox.matrix.host import HostRegistry; "
            "HostRegistry(Path(sys.argv[1])).claim('k' * 64, 64, True, None); print('claimed', flush=True); "
            "time.sleep(600)")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "claimed"
        reg = HostRegistry(tmp_path)
        assert len(reg.running()) == 1
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert reg.running() == []
        mine = reg.claim("m" * 64, 1, True, None)
        assert mine.running_at_start == [] and mine.cpus == [min(os.sched_getaffinity(0))]
        reg.release(mine)
    finally:
        p.kill()


def test_pcie_relations_from_sysfs_paths() -> None:
    root = "/sys/devices/pci0000:00"
    a = f"{root}/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:1b:00.0"
    b = f"{root}/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:1c:00.0"   # behind the same switch
    c = f"{root}/0000:00:03.0/0000:3b:00.0"                             # another root port
    d = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"             # another root complex
    assert pcie_relation(a, b) == "shared_link"
    assert pcie_relation(a, c) == "same_host_bridge"
    assert pcie_relation(a, d) == "separate_host_bridges"
    assert sysfs_bus_id("00000000:1B:00.0") == "0000:1b:00.0"
    # this machine's own PCIe tree, through sysfs
    devices = sorted(Path("/sys/bus/pci/devices").glob("*"))
    if devices:
        path = pcie_path(devices[0].name)
        assert path is not None and path.startswith("/sys/devices/pci") and path.endswith(devices[0].name)
    assert pcie_path("0000:ff:1f.7") is None


def test_gpu_query_parser_on_nvidia_smi_output_text() -> None:
    text = ("0, GPU-11111111-aaaa-bbbb-cccc-000000000000, 00000000:1B:00.0, NVIDIA H200\n"
            "1, GPU-22222222-aaaa-bbbb-cccc-000000000000, 00000000:43:00.0, NVIDIA H200\n")
    gpus = parse_gpu_query(text)
    assert [g.index for g in gpus] == ["0", "1"] and gpus[1].bus_id == "00000000:43:00.0"
    assert visible_gpu(gpus, "1") == gpus[1]
    assert visible_gpu(gpus, "GPU-22222222-aaaa-bbbb-cccc-000000000000,0") == gpus[1]
    assert visible_gpu(gpus, None) == gpus[0] and visible_gpu(gpus, "7") is None
    assert cpu_ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and cpu_ranges([]) == "none"


# --- real matrices --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One local Ray cluster for the module; its workers see this process's environment."""
    import ray

    saved = {k: os.environ.get(k) for k in ("BENCHBOX_MATRIX_DIR", "PYTHONPATH")}
    os.environ["BENCHBOX_MATRIX_DIR"] = str(tmp_path_factory.mktemp("registry"))
    # workers start in Ray's own folder: they find tests/ and examples/ through the path
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [saved["PYTHONPATH"]])])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


TINY_PLAN = """
name = "tiny"
task = "decision"
[axes]
runner = ["torch-eager"]
contract = ["public_task_call_wall", "model_io_wall"]
[run]
cases = ["invoice"]
samples = 5
warmup = 1
[resources]
cpus = 1
"""


def _facts(store: Path) -> dict[str, tuple]:
    """What each stored receipt measured, timings aside, by matrix cell."""
    out = {}
    for p in (store / "receipts").glob("*.json"):
        r = json.loads(p.read_text())
        labels = r["settings"]["labels"]
        out[labels["matrix_cell"]] = (
            r["contract"]["hash"], r["task"]["name"], r["task"]["size"], r["complete"],
            tuple((x["runner"], x["case"], x["status"], x["summary"]["n"]) for x in r["results"]),
            labels["matrix_config"], labels["matrix_revision"])
    return out


def test_local_and_ray_executors_give_the_same_receipts(tmp_path: Path, ray_cluster) -> None:
    plan = _plan(tmp_path, TINY_PLAN)
    local = run_matrix(plan, tmp_path / "local", "local", revision="rev-1")
    on_ray = run_matrix(plan, tmp_path / "ray", "ray", revision="rev-1")
    assert [o.status for o in local.outcomes] == ["valid", "valid"], local.outcomes
    assert [o.status for o in on_ray.outcomes] == ["valid", "valid"], on_ray.outcomes
    a, b = _facts(tmp_path / "local"), _facts(tmp_path / "ray")
    assert len(a) == 2 and a == b
    assert Store(tmp_path / "local").cells() == Store(tmp_path / "ray").cells() == set(a)
    assert {c.identity("rev-1") for c in plan.cells} == set(a)
    for store, executor in ((tmp_path / "local", "local"), (tmp_path / "ray", "ray")):
        for p in (store / "receipts").glob("*.json"):
            labels = json.loads(p.read_text())["settings"]["labels"]
            assert labels["matrix_executor"] == executor and labels["matrix_cpus_declared"] == "1"
            assert labels["matrix_cpus_pinned"] != "none" and labels["matrix_pcie_shared"] == "n/a"
            if executor == "local":  # one after another: nothing ran beside it
                assert labels["matrix_overlapping_cells"] == "0"
    # the record of each matrix run lists every cell
    record = json.loads(on_ray.record.read_text())
    assert record["executor"] == "ray" and [c["status"] for c in record["cells"]] == ["valid", "valid"]

    # re-running skips the cells in the store, through the CLI
    r = subprocess.run([sys.executable, "-m", "benchbox", "matrix", str(plan.path), "--store",
                        str(tmp_path / "local"), "--revision", "rev-1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 cells: 2 skipped" in r.stdout
    assert _facts(tmp_path / "local") == a and len(list((tmp_path / "local" / "receipts").glob("*"))) == 2


def _mixed_plan(tmp: Path, faulty: str, samples: int = 5, extra: str = "") -> object:
    return _plan(tmp, f"""
name = "mixed"
[axes]
task = ["tests.matrix_tasks:well_behaved", "tests.matrix_tasks:{faulty}"]
runner = ["torch-eager"]
[run]
samples = {samples}
warmup = 1
task_options = {{ pid_file = "{tmp / 'pids'}" }}
{extra}
""")


def test_a_cell_that_exits_is_failed_keeps_what_it_measured_and_the_matrix_goes_on(tmp_path: Path) -> None:
    plan = _mixed_plan(tmp_path, "exits")
    result = run_matrix(plan, tmp_path / "store", "local", revision="rev-1")
    good, bad = result.outcomes
    assert good.status == "valid" and good.receipts
    assert bad.status == "failed" and "exited with code 3" in bad.reason, bad.reason
    assert result.exit_code == 1
    # the receipt the dead run left holds the case it finished; it stays out of the store
    (kept,) = bad.kept
    partial = json.loads(Path(kept).read_text())
    assert partial["complete"] is False
    assert [(x["case"], x["status"]) for x in partial["results"]] == [("praise", "valid")]
    assert partial["settings"]["labels"]["matrix_cell"] == bad.cell_id
    assert bad.log and Path(bad.log).exists()
    assert Store(tmp_path / "store").cells() == {good.cell_id}
    # again: the stored cell is skipped, the failed one runs (and fails) again
    again = run_matrix(plan, tmp_path / "store", "local", revision="rev-1")
    assert [o.status for o in again.outcomes] == ["skipped", "failed"]


def test_a_cell_past_its_timeout_is_stopped_and_keeps_its_samples(tmp_path: Path) -> None:
    plan = _mixed_plan(tmp_path, "slow", 400, "[resources]\ntimeout_s = 25")
    result = run_matrix(plan, tmp_path / "store", "local", revision="rev-1")
    good, bad = result.outcomes
    assert good.status == "valid"
    assert bad.status == "failed" and bad.reason.startswith("timed out after 25 s"), bad.reason
    (kept,) = bad.kept
    partial = json.loads(Path(kept).read_text())
    assert partial["interrupted"] is True
    rows = {x["case"]: x for x in partial["results"]}
    assert rows["praise"]["status"] == "valid" and rows["praise"]["summary"]["n"] == 400
    assert rows["complaint"].get("partial") is True and len(rows["complaint"]["samples_ns"]) >= 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_killed_ray_worker_is_a_failed_cell_not_a_lost_matrix(tmp_path: Path, ray_cluster) -> None:
    plan = _mixed_plan(tmp_path, "waits")
    pids = tmp_path / "pids"
    seen: dict[str, int] = {}

    def kill_the_worker() -> None:
        for _ in range(600):
            if pids.exists():
                child, worker = map(int, pids.read_text().split())
                cmdline = Path(f"/proc/{worker}/cmdline").read_bytes()
                assert cmdline.startswith(b"ray::"), cmdline  # never anything but a Ray worker
                seen.update(child=child, worker=worker)
                os.kill(worker, signal.SIGKILL)
                return
            time.sleep(0.5)

    killer = threading.Thread(target=kill_the_worker, daemon=True)
    killer.start()
    result = run_matrix(plan, tmp_path / "store", "ray", revision="rev-1")
    killer.join(timeout=5)
    assert seen, "the waiting cell never started"
    good, bad = result.outcomes
    assert good.status == "valid"
    assert bad.status == "failed" and "Ray worker failed" in bad.reason and "died" in bad.reason, bad.reason
    assert Store(tmp_path / "store").cells() == {good.cell_id}
    for _ in range(40):  # the benchmark process dies with its worker
        if not _alive(seen["child"]):
            break
        time.sleep(0.25)
    assert not _alive(seen["child"])


def test_a_cell_dies_with_a_killed_local_driver(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(f"""
task = "tests.matrix_tasks:waits"
[axes]
runner = ["torch-eager"]
[run]
samples = 5
warmup = 1
task_options = {{ pid_file = "{tmp_path / 'pids'}" }}
""")
    driver = subprocess.Popen([sys.executable, "-m", "benchbox", "matrix", str(tmp_path / "plan.toml"),
                               "--store", str(tmp_path / "store")], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if (tmp_path / "pids").exists() or driver.poll() is not None:
                break
            time.sleep(0.25)
        child, parent = map(int, (tmp_path / "pids").read_text().split())
        assert parent == driver.pid
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        for _ in range(40):
            if not _alive(child):
                break
            time.sleep(0.25)
        assert not _alive(child)
    finally:
        driver.kill()


def test_a_cell_of_contracts_measured_together_stores_one_receipt_per_contract(tmp_path: Path) -> None:
    plan = _plan(tmp_path, f"""
task = "{SENTIMENT}"
together = ["contract"]
[axes]
runner = ["torch-eager"]
contract = ["public_task_call_wall", "model_io_wall"]
[run]
samples = 5
warmup = 1
""")
    (outcome,) = run_matrix(plan, tmp_path / "store", "local", revision="rev-1").outcomes
    assert outcome.status == "valid" and len(outcome.receipts) == 2
    receipts = [json.loads(p.read_text()) for p in (tmp_path / "store" / "receipts").glob("*.json")]
    assert sorted(r["contract"]["name"] for r in receipts) == ["model_io_wall", "public_task_call_wall"]
    assert {r["settings"]["labels"]["matrix_cell"] for r in receipts} == {outcome.cell_id}
    assert all(r["settings"]["contracts_in_run"] == ["public_task_call_wall", "model_io_wall"]
               for r in receipts)


def test_the_documented_plans_are_valid(tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    mine = (ROOT / "benchbox/contracts/builtin/model_io_wall.toml").read_text()
    (tmp_path / "contracts" / "mine.toml").write_text(mine.replace('name = "model_io_wall"', 'name = "mine"'))
    docs = (ROOT / "docs/matrix.md").read_text().split("```toml\n")[1].split("```")[0]
    section = (ROOT / "README.md").read_text().split("## Running a matrix")[1]
    readme = section.split("```toml\n")[1].split("```")[0]
    assert len(_plan(tmp_path, docs, "docs.toml").cells) == 6
    assert len(_plan(tmp_path, readme, "readme.toml").cells) == 8


@pytest.mark.parametrize(("signum", "ignored"), [(signal.SIGINT, False), (signal.SIGTERM, False),
                                                (signal.SIGINT, True)],
                         ids=["sigint", "sigterm", "sigint-ignored-at-start"])
def test_a_signal_stops_a_local_matrix_and_keeps_what_the_cell_measured(tmp_path: Path, signum: int,
                                                                        ignored: bool) -> None:
    """SIGINT as Ctrl-C sends it (to the driver's whole group); SIGTERM as a scheduler or a CI
    cancel does (to the driver only). Either way the cell in progress keeps what it measured.
    ``ignored``: the driver starts with SIGINT ignored, as a job started in the background by a
    shell without job control (or a test worker) inherits it; an explicit SIGINT still stops it,
    as it stops ``benchbox run``."""
    (tmp_path / "plan.toml").write_text(f"""
[axes]
task = ["tests.matrix_tasks:slow", "{SENTIMENT}"]
runner = ["torch-eager"]
[run]
samples = 400
warmup = 1
""")
    store = tmp_path / "store"
    driver = subprocess.Popen([sys.executable, "-m", "benchbox", "matrix", str(tmp_path / "plan.toml"),
                               "--store", str(store)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, process_group=0,
                              preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored
                              else None)
    log = None
    for _ in range(240):  # until the slow cell has measured its first case
        logs = list((tmp_path / "registry" / "work").glob("*/run.log"))
        if logs and "praise: valid" in logs[0].read_text():
            log = logs[0]
            break
        time.sleep(0.25)
    assert log is not None
    if signum == signal.SIGINT:
        os.killpg(driver.pid, signum)
    else:
        driver.send_signal(signum)
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert err.strip().splitlines()[-1].startswith(f"benchbox: interrupted ({name}): 0 of 2 cells finished")
    (record,) = (store / "matrix" / "runs").glob("*.json")
    cells = json.loads(record.read_text())["cells"]
    assert [(c["status"], c["reason"]) for c in cells] == [
        ("failed", "interrupted"), ("not_run", "the matrix stopped first")]
    (kept,) = cells[0]["kept"]
    partial = json.loads(Path(kept).read_text())
    rows = {x["case"]: x for x in partial["results"]}
    assert partial["interrupted"] is True and rows["praise"]["status"] == "valid"
    assert rows["complaint"].get("partial") is True and rows["complaint"]["samples_ns"]
    assert Store(store).cells() == set()


def test_cpu_lists_and_the_cpus_near_a_pci_device() -> None:
    from benchbox.matrix.host import local_cpus, parse_cpulist

    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11] and parse_cpulist("") == []
    devices = sorted(Path("/sys/bus/pci/devices").glob("*"))
    if devices and (devices[0] / "local_cpulist").exists():  # this machine's own PCI devices
        near = local_cpus(devices[0].name)
        assert near == parse_cpulist((devices[0] / "local_cpulist").read_text())
    assert local_cpus("0000:ff:1f.7") is None


def test_pcie_labels_of_two_concurrent_cells_with_this_machines_pci_devices_standing_in_for_gpus(
        tmp_path: Path) -> None:
    from benchbox.matrix.host import Gpu

    devices = [d.name for d in sorted(Path("/sys/bus/pci/devices").glob("*"))]
    if len(devices) < 2:
        pytest.skip("this machine shows fewer than two PCI devices in sysfs")
    a_gpu, b_gpu = (Gpu(str(i), f"GPU-{i}", f"0000{d}", "stand-in") for i, d in enumerate(devices[:2]))
    reg = HostRegistry(tmp_path)
    a = reg.claim("a" * 64, 1, True, a_gpu)
    b = reg.claim("b" * 64, 1, True, b_gpu)
    assert a.entry["pcie_path"] == pcie_path(a_gpu.bus_id) and a.entry["pcie_path"].endswith(devices[0])
    labels = overlap_labels(b, reg.release(b), b_gpu)
    expected = pcie_relation(b.entry["pcie_path"], a.entry["pcie_path"])
    assert labels["matrix_pcie_relations"] == f"{a_gpu.bus_id}:{expected}"
    assert labels["matrix_pcie_shared"] == ("true" if expected == "shared_link" else "false")
    assert labels["matrix_overlapping_cells"] == "1"
    reg.release(a)
    same = reg.claim("c" * 64, 1, True, a_gpu)
    other = reg.claim("d" * 64, 1, True, a_gpu)  # two cells on one GPU: the labels must say so
    assert overlap_labels(other, reg.release(other), a_gpu)["matrix_pcie_shared"] == "true"
    reg.release(same)


def test_a_killed_drivers_work_folders_are_removed_by_the_next_cell(tmp_path: Path) -> None:
    from benchbox.matrix.cell import clean_stale_work

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        work = tmp_path / "work"
        names = (f"0123456789ab-{dead}", f"ba9876543210-{live.pid}", f"cafecafecafe-{os.getpid()}", "notes")
        for name in names:
            (work / name).mkdir(parents=True)
            (work / name / "run.log").write_text("x")
        assert clean_stale_work(work) == [f"0123456789ab-{dead}"]
        assert sorted(os.listdir(work)) == sorted([f"ba9876543210-{live.pid}", f"cafecafecafe-{os.getpid()}",
                                                   "notes"])
    finally:
        live.kill()
        live.wait()


#: a plan with every kind of value: its cells' configurations are pinned by hash, so a change in
#: how plans are read that changed what a cell measures (or its identity) fails here
PINNED_PLAN = """name = " pinned "
description = "every kind of value a plan carries"
together = ["runner"]
[axes]
size = ["tiny", "small"]
dtype = "float32"
runner = ["torch-eager", "torch-compile"]
contract = ["public_task_call_wall", "model_io_wall"]
[run]
cases = ["invoice"]
samples = 50
warmup = 2
target_ci = 5
max_time = 30
baseline = "torch-eager"
task_options = {scale = 2.0, label = "x", flag = true, n = 3}
gates = {max_abs_err = 1, rel = 0.5}
[resources]
cpus = 2
timeout_s = 600
pin_cpus = false
[runner_options.torch-compile]
mode = "default"
aten_fallbacks = ["layer_norm"]
inductor_options = {max_autotune = false, n = 2.0}
[ray]
runtime_env = {pip = ["x"]}
[[exclude]]
size = "small"
contract = "model_io_wall"
"""
PINNED_CELLS = "898d743bbae053ad1fb207534ada031d1348ff160376d0c6265f51e2192f087f"


def test_the_cells_a_plan_declares_are_the_same_as_before_it_was_a_typed_record() -> None:
    import hashlib
    import json
    import tomllib

    from benchbox.matrix import parse_plan

    plan = parse_plan(tomllib.loads(PINNED_PLAN), "pinned")
    blob = json.dumps([[c.config(), c.timeout_s, c.pin_cpus] for c in plan.cells]
                      + [plan.name, plan.description, plan.ray], sort_keys=True)
    assert len(plan.cells) == 3
    assert hashlib.sha256(blob.encode()).hexdigest() == PINNED_CELLS
    assert plan.cells[0].task_options == {"scale": 2.0, "label": "x", "flag": True, "n": 3}
    assert isinstance(plan.cells[0].task_options["scale"], float)  # 2.0 stays a float: it is hashed
