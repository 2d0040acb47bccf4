"""Approver groups (§20, docs/approvals.md): publishing a `kind: approvers` file stores its members
(`approver_groups`, migration 0036); who may decide an approval is read from them when a person decides, so a
member removed and republished can no longer decide. What publish knows of them: each group's member count."""

from __future__ import annotations


async def store_groups(store, project: str, groups: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """[(name, created | updated | unchanged)] for each (name, members)."""
    now = store.clock.now()
    return [(name, await store.fetchval("approver_groups_store", project=project, name=name,
                                        members=list(dict.fromkeys(members)), now=now))
            for name, members in groups]


async def published_groups(store, project: str) -> dict[str, list[str]]:
    return {r["name"]: list(r["members"]) for r in await store.fetch("approver_groups_of_project", project=project)}
