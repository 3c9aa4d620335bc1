"""The one record builder, and what conversions and verifications add to it.

Every kind of record (train, convert, verify, bench, peak, eval) starts from
``new_record``, so each carries the same context: machine, versions, commit,
command line, identity.  Every export and build stores one ``convert``
record, every ``dlbench verify`` one ``verify`` record, with status:

* ``ok`` — converted (or compared) and within tolerance;
* ``unverified`` — the file exists, but it does not compute what its source
  computes within tolerance (the verdict says where);
* ``failed`` — the conversion or a runner crashed, timed out or was refused
  at run time; no artifact.

Each produced file also gets an ``artifacts`` row (path, sha256, format,
precision, source and its sha256, verified flag, verdict), so a later
benchmark can look a file up by content: ``ResultStore.artifact(sha256)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlbench.core.devices import training_name
from dlbench.core.version import __version__
from dlbench.harness.cells.cellenv import context as cell_context
from dlbench.harness.machine.fingerprint import fingerprint, resource_label
from dlbench.harness.store.context import cell_key, command_line, now_iso
from dlbench.harness.store.results import ResultStore
from dlbench.models.user import trust


def new_record(
    kind: str,
    *,
    run_id: str,
    identity: dict[str, Any],
    started: str,
    argv: list[str] | None,
    device: str = "cpu",
    fp: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The one record skeleton every kind (train, convert, verify, bench, peak, eval) starts
    from: who, where, when, with what, and the key that makes a resumed run skip it.

    ``identity`` is what makes two records measure the same thing; the machine is added to
    it here, so a key never matches across machines.  ``fields`` are the kind's own columns
    (model, backend, precision, throughput_sps, ...).  ``env`` is the environment its cells
    were given (``cellenv.cell_environment``): its thread variables and allocator go into the
    context here, one description for every kind.  A record starts as failed: only a
    finished measurement or verdict may say otherwise.
    """
    fp = fp or fingerprint()
    record = {
        "run_id": run_id,
        "kind": kind,
        "cell_key": cell_key(kind, {**identity, "machine_id": fp["machine_id"]}),
        "status": "failed",
        "error": None,
        "started_at": started,
        "duration_s": None,
        "device": device,
        "machine_id": fp["machine_id"],
        "dlbench_version": __version__,
        "git_commit": fp["git_commit"],
        "command_line": command_line(argv),
        "context": {
            "identity": identity,
            "resource": resource_label(fp, training_name(device)),
            # --trust-model: model files that can run code were allowed to (models.user.trust)
            "model_trust_granted": trust.trusted(),
            **(cell_context(env) if env is not None else {}),
        },
        "metrics": {},
    }
    record.update(fields)
    return record


def finish(record: dict[str, Any], verdict, *, error: str | None = None) -> dict[str, Any]:
    """Status and error from the verdict (or the failure)."""
    if error is not None:
        record["status"], record["error"] = "failed", error
    elif verdict is not None:
        record["status"] = "ok" if verdict.ok else "unverified"
        record["error"] = None if verdict.ok else verdict.message
        record["metrics"]["verdict"] = verdict.to_dict()
        record["metrics"]["outputs"] = {
            o.name: {k: getattr(o, k) for k in ("max_abs", "max_rel", "mean_abs", "cosine", "top1")}
            for o in verdict.outputs
        }
        record["metrics"]["batch_sizes"] = verdict.batch_sizes
    return record


def store(db: str | None, record: dict[str, Any], artifact: dict[str, Any] | None) -> int:
    """Add the record (and the artifact row pointing at it); return the record id."""
    rs = ResultStore(db)
    fp = fingerprint()
    record["id"] = rs.add(record, fp)
    if artifact is not None:
        artifact = {**artifact, "record_id": record["id"], "created_at": now_iso()}
        artifact["verified"] = record["status"] == "ok"
        artifact["verdict"] = record["metrics"].get("verdict") or {
            "ok": False,
            "message": record.get("error"),
        }
        record["artifact_id"] = rs.add_artifact(artifact)
    return record["id"]


def keep(
    record: dict[str, Any],
    store: ResultStore,
    fp: dict[str, Any],
    records: list[dict[str, Any]],
    json_path: str | None,
    on_record=None,
    only_if_absent: bool = False,
) -> None:
    """A sweep's finished cell: stored at once (one transaction), the ``--json`` file
    rewritten atomically, the caller told; so an interrupted sweep leaves complete
    records only, in the database and the file alike.  ``only_if_absent`` (a resume):
    a cell another writer finished meanwhile keeps that writer's record, and this one is
    neither stored nor listed, only said."""
    import sys

    from dlbench.core.atomic import write_json

    record["id"] = store.add(record, fp, only_if_absent=only_if_absent)
    if record["id"] == 0:
        print(
            f"note: cell {record.get('cell_key')} ({record.get('model')} on {record.get('backend')}) was "
            "stored meanwhile by another run resuming the same sweep; this measurement is not stored",
            file=sys.stderr,
        )
        return
    records.append(record)
    if json_path:
        write_json(json_path, records)
    if on_record:
        on_record(record)


def artifact_row(
    path: Path,
    sha: str,
    fmt: str,
    precision: str,
    *,
    model: str | None,
    framework: str | None,
    hop: str,
    source_path: Path | None,
    source_sha256: str | None,
) -> dict[str, Any]:
    return {
        "path": str(Path(path).resolve()),
        "sha256": sha,
        "format": fmt,
        "precision": precision,
        "model": model,
        "framework": framework,
        "hop": hop,
        "size_bytes": Path(path).stat().st_size,
        "source_path": str(Path(source_path).resolve()) if source_path else None,
        "source_sha256": source_sha256,
    }
