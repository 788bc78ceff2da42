"""What the flags mean: storage options, durations and sizes, the clock, the policy settings
and the Spark job. Every command reads its flags through here, so a flag means one thing
everywhere and a bad value is bad input (exit 2) that names the flag."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deltakeeper.delta.errors import InvalidInputError
from deltakeeper.delta.storage import normalize_options
from deltakeeper.delta.vacuum.modes import InventoryFormat, Mode
from deltakeeper.maintenance import policy
from deltakeeper.maintenance.operations import Operation
from deltakeeper.maintenance.policy import PolicyError
from deltakeeper.resources.spec import catalog_allowed
from deltakeeper.units import parse_duration_ms, parse_size, parse_timestamp_ms

if TYPE_CHECKING:
    from deltakeeper.compaction.submit import SubmitLauncher


def storage_options(pairs: list[str], flag: str = "--storage-option") -> dict[str, Any]:
    """KEY=VALUE pairs; true/false become booleans, JSON objects those fsspec wants as
    mappings (client_kwargs=...)."""
    options: dict[str, Any] = {}
    for n, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            # Never echoed: a value typed without its key is still a secret.
            raise InvalidInputError(
                f"{flag} number {n} is not KEY=VALUE (its text is not shown, it may "
                f"be a secret); write it as e.g. {flag} secret=..."
            )
        lowered = value.lower()
        options[key] = lowered == "true" if lowered in ("true", "false") else value
    return normalize_options(options)


def parsed(flag: str, text: str | None, parse: Callable[[str], Any]) -> int | None:
    """A flag's text as a number (a duration, size or time), None when not given."""
    try:
        return None if text is None else int(parse(text))
    except ValueError as e:
        raise InvalidInputError(f"{flag}: {e}") from e


def now(args: argparse.Namespace) -> int:
    """--now, else the clock."""
    given = parsed("--now", args.now, parse_timestamp_ms)
    if given is None:
        return int(time.time() * 1000)
    if given == 0:  # once silently replaced by the clock; say so instead
        raise InvalidInputError("--now 0 is the epoch itself; give a time after 1970-01-01")
    return given


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The policy settings the command's flags set, as `policy.effective`'s keywords; None
    (and a flag the command does not have) means not set here."""
    given = vars(args)
    only = (given.get("only") or "").split(",")
    return {
        "log_retention_ms": _text(given, "--log-retention", parse_duration_ms),
        "deleted_file_retention_ms": _text(given, "--deleted-file-retention", parse_duration_ms),
        "checkpoint_interval": given.get("checkpoint_interval"),
        "vacuum_enabled": False if given.get("no_vacuum") else None,
        "allow_short_retention": given.get("allow_short_retention") or None,
        "write_checksum": given.get("write_checksum") or None,
        "checkpoint_part_size": given.get("part_size"),
        # maintain --engine: what runs its checkpoint and vacuum
        "checkpoint_engine": given.get("engine"),
        "vacuum_engine": given.get("engine"),
        **vacuum_settings(given),
        # --only compaction asks for it as --compact does
        "compaction_enabled": given.get("compact") or Operation.COMPACTION in only or None,
        "compaction_target_file_size": _text(given, "--target-file-size", parse_size),
        "compaction_min_file_size": _text(given, "--min-file-size", parse_size),
        "compaction_min_files_per_partition": given.get("min_files"),
        # 0 counts as not given: the default (policy.COMPACTION_MAX_AGE_MS)
        "compaction_max_age_ms": _text(given, "--max-age", parse_duration_ms) or None,
        "catalog_allowed": catalog_allows(given.get("catalog_allows")),
    }


def catalog_allows(text: str | None) -> frozenset[str] | None:
    """--catalog-allows OPS: what a catalog-managed table's catalog permits; None: not given."""
    if text is None:
        return None
    try:
        return catalog_allowed("--catalog-allows", [n for n in text.split(",") if n])
    except PolicyError as e:
        raise InvalidInputError(str(e)) from e


def vacuum_settings(given: dict[str, Any]) -> dict[str, Any]:
    """--mode, --inventory and --inventory-format as policy settings (--inventory alone asks
    for an INVENTORY vacuum, no --mode for policy.CLI_VACUUM_MODE)."""
    uri = given.get("inventory")
    mode = given.get("mode") or (Mode.INVENTORY if uri else None)
    if uri and mode != Mode.INVENTORY:
        raise InvalidInputError(f"--inventory is read by --mode inventory only, not {mode}")
    if mode is None and "mode" in given:  # a command with --mode: vacuum or maintain
        mode = policy.CLI_VACUUM_MODE
    fmt = InventoryFormat(given.get("inventory_format") or InventoryFormat.AUTO)
    return {
        "vacuum_mode": Mode(mode) if mode else None,
        "vacuum_inventory": policy.InventorySettings(uri, fmt) if uri else None,
    }


def _text(given: dict[str, Any], flag: str, parse: Callable[[str], Any]) -> int | None:
    """A text flag the command may not have, parsed."""
    return parsed(flag, given.get(flag.removeprefix("--").replace("-", "_")), parse)


def policy_for(uri: str, configuration: dict[str, str], chosen: dict[str, Any]) -> policy.Policy:
    """The table's effective policy with the flags' settings over its own."""
    part_size = chosen["checkpoint_part_size"]
    if part_size is not None and part_size <= 0:
        raise InvalidInputError(f"the checkpoint part size must be above 0, got {part_size}")
    try:
        return policy.effective(configuration, **chosen)
    except policy.PolicyError as e:
        raise InvalidInputError(f"{uri}: {e}") from e


def operations(only: str | None) -> tuple[Operation, ...]:
    """--only OPS: the operations to plan, always in the safe order."""
    every = tuple(Operation)
    if not only:
        return every
    ops = tuple(o.strip() for o in only.split(","))
    unknown = [o for o in ops if o not in every]
    if unknown:
        raise InvalidInputError(
            f"--only: unknown operation {', '.join(unknown)}; use {','.join(every)}"
        )
    return tuple(o for o in every if o in ops)


def where(pairs: list[str], names: dict[str, str]) -> dict[str, str]:
    """--where COL=VALUE on logical names -> {physical name: value}."""
    physical = {logical: phys for phys, logical in names.items()}
    out: dict[str, str] = {}
    for pair in pairs:
        column, sep, value = pair.partition("=")
        if not sep or column not in physical:
            raise InvalidInputError(
                f"--where expects PARTITION_COLUMN=VALUE with one of "
                f"{', '.join(sorted(physical)) or '(no partition columns)'}; got {pair!r}"
            )
        out[physical[column]] = value
    return out


def spark_launcher(args: argparse.Namespace) -> SubmitLauncher:
    """The spark-submit launcher the Spark flags (--master, --jars-dir, --spark-conf) set."""
    from deltakeeper.compaction import submit  # loaded by the commands that may run a job only

    conf = dict(pair.partition("=")[::2] for pair in args.spark_conf)
    return submit.SubmitLauncher(
        submit.SubmitConfig(args.master, jars_dir=args.jars_dir, conf=conf)
    )
