"""The RQ adapter (``services.reconciler.worker``) lists every RQ method it overrides, and
each is still RQ's as this code was written against: an RQ upgrade that renames one, drops
it or changes its parameters fails here, not in a running worker."""

from __future__ import annotations

import inspect

from rq import SimpleWorker
from rq.job import Job

from services.reconciler import worker

BASES = {"Job": (Job, worker.AllowListedJob), "SimpleWorker": (SimpleWorker,
                                                               worker.ReconcilerWorker)}

# RQ 3.0's parameters of each overridden method ("property" for a property)
EXPECTED = {
    "Job": {"func": "property", "success_callback": "property",
            "failure_callback": "property", "stopped_callback": "property",
            "send_webhooks": "self status * exc_string", "dependent_ids": "property"},
    "SimpleWorker": {
        "job_class": "id connection serializer",
        "work": "self burst logging_level date_format log_format max_jobs max_idle_time "
                "with_scheduler dequeue_strategy",
        "bootstrap": "self logging_level date_format log_format",
        "register_birth": "self", "teardown": "self", "unsubscribe": "self",
        "_pubsub_exception_handler": "self exc pubsub pubsub_thread",
        "execute_job": "self job queue", "heartbeat": "self timeout pipeline",
        "prepare_execution": "self job",
        "prepare_job_execution": "self job remove_from_intermediate_queue",
        "handle_execution_ended": "self job queue heartbeat_ttl",
        "handle_job_success": "self job queue started_job_registry execution",
        "_enqueue_dependents_safely": "self queue job",
        "run_maintenance_tasks": "self",
        "dequeue_job_and_maintain_ttl": "self timeout max_idle_time"},
}


def _shape(cls: type, name: str) -> str:
    """A method's parameter names ("*" before the keyword-only ones), or "property"."""
    if isinstance(inspect.getattr_static(cls, name), property):
        return "property"
    out: list[str] = []
    for p in inspect.signature(getattr(cls, name)).parameters.values():
        if p.kind is p.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        out.append(p.name)
    return " ".join(out)


def test_every_override_is_listed() -> None:
    for base_name, (base, ours) in BASES.items():
        overridden = {n for n in vars(ours) if not n.startswith("__") and hasattr(base, n)}
        assert overridden == set(worker.RQ_HOOKS[base_name]), base_name


def test_every_listed_hook_is_still_rqs_with_the_same_parameters() -> None:
    for base_name, (base, _ours) in BASES.items():
        for name in worker.RQ_HOOKS[base_name]:
            assert hasattr(base, name), f"RQ's {base_name} has no {name} any more"
            assert _shape(base, name) == EXPECTED[base_name][name], f"{base_name}.{name}"
