"""Executors: where the cells of a matrix run. ``local`` one after another here, ``ray`` on a cluster."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from benchbox.errors import FieldError, MissingExtraError, Setting, UsageError, error_line
from benchbox.matrix.cell import CellJob, CellRun, execute

OnDone = Callable[[CellJob, CellRun], None]
OnStart = Callable[[CellJob], None]
EXECUTORS = ("local", "ray")


class LocalExecutor:
    """Cells one after another on this machine, each in its own ``benchbox run`` subprocess."""

    name = "local"

    def start(self) -> None:
        """Nothing to start: cells run here."""

    def stop(self) -> None:
        """Nothing to stop."""

    def run_cells(self, jobs: list[CellJob], on_done: OnDone, on_start: OnStart | None = None) -> None:
        for job in jobs:
            if on_start is not None:
                on_start(job)
            run = execute(job)
            on_done(job, run)
            if run.interrupted:
                raise KeyboardInterrupt


class RayExecutor:
    """Cells as Ray tasks: one whole GPU per CUDA cell (``num_gpus=1``), the declared CPUs each.

    Each task runs :func:`benchbox.matrix.cell.execute` in a worker and returns the
    receipts as bytes. A task is never retried: a worker that dies makes a failed cell.
    Connects with ``ray.init(address=...)``; with no address and no ``RAY_ADDRESS`` Ray
    starts a local instance for the matrix and stops it at the end. An already
    initialised Ray (a test's local cluster) is used as it is.
    """

    name = "ray"

    def __init__(self, address: str | None = None, runtime_env: dict[str, Any] | None = None) -> None:
        self.address = address
        self.runtime_env = runtime_env or {}
        self.cluster: dict[str, Any] = {}
        self._ray: Any = None
        self._started = False

    def _feasible(self, ray: Any, job: CellJob) -> str | None:
        """None when some live node could run the cell, else why none can."""
        need_gpu = 1.0 if job.cell.device == "cuda" else 0.0
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if any(r.get("CPU", 0) >= job.cell.cpus and r.get("GPU", 0) >= need_gpu for r in nodes):
            return None
        largest = max((f"{r.get('CPU', 0):g} CPUs, {r.get('GPU', 0):g} GPUs" for r in nodes), default="none")
        what = f"{job.cell.cpus} CPUs" + (" and a GPU" if need_gpu else "")
        return f"no node of the Ray cluster has {what} (largest node: {largest})"

    def start(self) -> None:
        """Connect to the cluster (or start a local instance) unless Ray is already initialised."""
        try:
            import ray
        except ImportError:
            raise MissingExtraError("ray", "matrix") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, runtime_env=self.runtime_env or None, log_to_driver=False)
            except Exception as e:  # Ray raises many kinds (ConnectionError, RuntimeError, ValueError)
                raise UsageError(f"cannot start or reach Ray at {self.address or 'a local instance'}: "
                                 f"{error_line(e, 300)}") from None

    def stop(self) -> None:
        """Shut down what :meth:`start` started."""
        if self._started:
            self._ray.shutdown()
            self._started = False

    def run_cells(self, jobs: list[CellJob], on_done: OnDone, on_start: OnStart | None = None) -> None:
        """Submit every cell, then gather them as they finish (Ray schedules them: ``on_start``,
        for cells run one by one, is not called)."""
        ray = self._ray
        futures: dict[Any, CellJob] = {}
        try:
            alive = [n for n in ray.nodes() if n.get("Alive")]
            self.cluster = {"nodes": len(alive), **{k: float(v) for k, v in ray.cluster_resources().items()
                                                    if k in ("CPU", "GPU")}}
            remote = ray.remote(execute)
            for job in jobs:
                why = self._feasible(ray, job)
                if why is not None:
                    on_done(job, CellRun(job.cell_id, None, why, None))
                    continue
                opts = {"num_cpus": job.cell.cpus, "num_gpus": 1 if job.cell.device == "cuda" else 0,
                        "max_retries": 0, "name": f"benchbox-cell-{job.cell_id[:12]}"}
                futures[remote.options(**opts).remote(job)] = job
            while futures:
                ready, _ = ray.wait(list(futures), num_returns=1)
                for f in ready:
                    job = futures.pop(f)
                    try:
                        run = ray.get(f)
                    except ray.exceptions.RayError as e:
                        run = CellRun(job.cell_id, None, f"the Ray worker failed: {error_line(e, 300)}", None)
                    on_done(job, run)
        except KeyboardInterrupt:
            for f in futures:
                ray.cancel(f, force=True)
            raise


def _check_reachable(address: str | None, timeout_s: float = 10.0) -> None:
    """Refuse a HOST:PORT address nothing listens on, at once (Ray itself retries for minutes)."""
    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise FieldError("ray_address", f"{address!r}: expected HOST:PORT, ray://HOST:PORT, auto or local")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UsageError(f"cannot reach Ray at {address}: {e.strerror or e}") from None


def make_executor(name: str, address: str | None = None, runtime_env: dict[str, Any] | None = None
                  ) -> LocalExecutor | RayExecutor:
    if name == "local":
        if address is not None:
            ray = Setting("executor", "ray")
            raise FieldError("ray_address", f"only with {ray}", settings=(ray,))
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address, runtime_env)
    raise FieldError("executor", f"unknown executor '{name}' ({', '.join(EXECUTORS)})")
