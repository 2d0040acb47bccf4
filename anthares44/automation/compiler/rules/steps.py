"""Step shape rules: unique ids, mandatory timeout (§3.1), the sleep-step form (§3.5b) and the fan-out form
(`partitions:` with exactly one source, `onPartitionFailure` only on a fan-out call step)."""

from __future__ import annotations

from ...diagnostics import Diagnostic, register

A44200 = register("A44200", "duplicate step id")
A44201 = register("A44201", "step has no timeout")
A44202 = register("A44202", "sleep step takes no uses, timeout or retry")
A44203 = register("A44203", "step has neither uses nor sleep")
A44206 = register("A44206", "partitions needs exactly one of foreach or range")
A44207 = register("A44207", "onPartitionFailure or partitions where they do not apply")


def check(project):
    for decl in project.of_kind("workflow"):
        src, wf = decl.src, decl.model
        seen: dict[str, int] = {}
        for i, step in enumerate(wf.steps):
            path = decl.path + ("steps", i)
            if step.id in seen:
                yield Diagnostic.at(A44200, f"step id {step.id!r} is already used by step {seen[step.id] + 1} "
                                            f"(line {src.span(decl.path + ('steps', seen[step.id], 'id')).line})",
                                    src.path, src.span(path + ("id",)), hint="step ids must be unique")
            else:
                seen[step.id] = i
            # as written: a key the salvage set aside (its value is wrong, and reported) still counts as given
            written = decl.written("steps", i)
            written = written if isinstance(written, dict) else {}
            yield from _fan_out(src, path, step, written)
            if step.sleep is not None:
                for key in ("uses", "timeout", "retry", "compensate", "exclusive", "with", "rows", "expect",
                            "partitions"):
                    if key in written:
                        yield Diagnostic.at(A44202, f"sleep step {step.id!r} takes no {key!r}", src.path,
                                            src.span(path + (key,), key=True),
                                            hint="a sleep holds no worker; split the effect into its own step")
                continue
            if step.uses is None and not ({"uses", "sleep"} & written.keys()):
                yield Diagnostic.at(A44203, f"step {step.id!r} has neither 'uses' nor 'sleep'", src.path,
                                    src.span(path, key=False),
                                    hint="add `uses: <connector>` (e.g. http, sql/execute, pass) or `sleep: 30s`")
                continue
            if step.uses is None:
                continue
            if step.timeout is None and "timeout" not in written:
                yield Diagnostic.at(A44201, f"step {step.id!r} has no timeout; every step must declare one",
                                    src.path, src.span(path + ("id",)),
                                    hint="add e.g. `timeout: 15s` (size it from the step's p99 plus 50%)")


def _fan_out(src, path, step, written: dict):
    p = step.partitions
    given = written.get("partitions") if isinstance(written.get("partitions"), dict) else {}
    if p is not None and (p.foreach is None) == (p.range is None) and not (
            p.foreach is None and {"foreach", "range"} & given.keys()):
        what = "both" if p.foreach is not None else "neither"
        yield Diagnostic.at(A44206, f"partitions of step {step.id!r} has {what} of 'foreach' and 'range'",
                            src.path, src.span(path + ("partitions",), key=True),
                            hint="give `foreach: <CEL list>` or `range: {from: <CEL>, to: <CEL>, every: 1d}`")
    if step.onPartitionFailure is not None and p is None and "partitions" not in written:
        yield Diagnostic.at(A44207, f"step {step.id!r} sets onPartitionFailure but has no partitions", src.path,
                            src.span(path + ("onPartitionFailure",), key=True),
                            hint="add `partitions:` or remove `onPartitionFailure`")
