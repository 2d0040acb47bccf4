"""CLI credentials (`$A44_HOME/credentials`, mode 0600) and the rule that decides where a runtime verb goes: the
database (local) or a daemon's REST API (remote). docs/cli.md "Remote mode" states the rule for users.

The file is JSON, one entry per project (what `a44 auth login` has always written, extended compatibly):

    {"projects": {"pj_checkout_prod": {"url": "http://host:8044", "token": "a44_pat_...", "default": true,
                                       "saved_at": "2026-07-19T14:02:11Z"}}}

Selection, first match wins (explicit beats implicit). Every `a44 auth login` selects its project and server for
the verbs that follow, until `a44 auth logout` (the entry marked `"default": true`: the latest login):

1. `--local`                      -> the database (A44_DATABASE_URL, else the embedded server);
2. `--api-url URL` / `--remote`   -> the API at URL, else A44_API_URL, else the project's stored login;
3. A44_API_URL set                -> the API there (refused if A44_DATABASE_URL is set too: say which);
4. A44_DATABASE_URL set           -> the database;
5. the selected login            -> the API it names, for its project; --project / A44_PROJECT naming another
                                     project -> that project's stored login, else refused (E_NOT_LOGGED_IN): a
                                     verb never lands quietly in another project or on another server;
6. otherwise                      -> the database (embedded).

A target chosen by rule 5 or 6 was implicit: the CLI says on stderr where the verb goes (`Target.implicit`).

The token: A44_API_TOKEN, else the stored login of the project *for that same URL* (a token is never sent to a
server it was not stored for). The variables come from the `Settings` the CLI read (`select_target(settings, ...)`),
the file from the a44 home it names (`home`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ..errors import E_NOT_LOGGED_IN, A44Error
from ..paths import a44_home
from ..redact import redact_url
from ..settings import DEFAULT_PROJECT, Settings
from .automation import InvalidArgument

DEFAULT_API_URL = "http://127.0.0.1:8044"



def credentials_path(home: Path) -> Path:
    return Path(home) / "credentials"


def load_credentials(home: Path) -> dict:
    try:
        doc = json.loads(credentials_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"projects": {}}
    if not isinstance(doc, dict) or not isinstance(doc.get("projects"), dict):
        return {"projects": {}}
    return doc


def save_credentials(home: Path, creds: dict) -> Path:
    """Write atomically-enough for one user: created 0600, chmod'ed again in case it existed with other bits."""
    path = credentials_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(creds, fh, indent=2)
        fh.write("\n")
    os.chmod(path, 0o600)
    return path


def normalize_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InvalidArgument(f"{url!r} is not an http(s) URL", hint="e.g. http://127.0.0.1:8044")
    return url


def store_login(home: Path, project: str, url: str, token: str, *, select: bool = True) -> Path:
    """Store `project`'s login; `select` (what `a44 auth login` does) makes it the one later verbs use."""
    creds = load_credentials(home)
    projects = creds.setdefault("projects", {})
    if select:
        for entry in projects.values():
            if isinstance(entry, dict):
                entry.pop("default", None)
    entry = {"url": normalize_url(url), "token": token,
             "saved_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if select:
        entry["default"] = True
    projects[project] = entry
    return save_credentials(home, creds)


def remove_login(home: Path, project: str | None) -> list[str]:
    """Forget `project`'s login (or every login when None); the projects removed."""
    creds = load_credentials(home)
    projects = creds.get("projects", {})
    gone = [p for p in list(projects) if project is None or p == project]
    for p in gone:
        del projects[p]
    if gone:
        save_credentials(home, creds)
    return gone


def default_login(home: Path) -> tuple[str, dict] | None:
    for project, entry in load_credentials(home).get("projects", {}).items():
        if isinstance(entry, dict) and entry.get("default") and entry.get("url") and entry.get("token"):
            return project, entry
    return None


@dataclass(frozen=True)
class Target:
    kind: str                       # "local" | "remote"
    project: str
    reason: str                     # what selected it (shown by --verbose)
    url: str | None = None          # remote: the API base URL
    token: str | None = None
    token_source: str | None = None
    project_explicit: bool = True   # remote: send A44-Project so a token of another project is refused
    database_url: str | None = None  # local: A44_DATABASE_URL (None: the embedded database)
    implicit: bool = False          # chosen by a stored login or by default, not by a flag or a variable

    @property
    def remote(self) -> bool:
        return self.kind == "remote"

    def describe(self) -> str:
        if self.remote:
            return f"remote {self.url} (project {self.project}; token from {self.token_source}; {self.reason})"
        where = f"database {redact_url(self.database_url)}" if self.database_url else "the embedded database"
        return f"local {where} (project {self.project}; {self.reason})"


def _env_project(project: str | None, settings: Settings) -> str | None:
    return project or settings.project or None


def _remote(settings: Settings, url: str, project: str | None, reason: str) -> Target:
    url = normalize_url(url)
    explicit = _env_project(project, settings)
    env_token = settings.api_token
    if env_token:
        return Target("remote", explicit or DEFAULT_PROJECT, reason, url, env_token, "A44_API_TOKEN",
                      project_explicit=explicit is not None)
    home = a44_home(settings.home)
    projects = load_credentials(home).get("projects", {})
    wanted = explicit or DEFAULT_PROJECT
    entry = projects.get(wanted)
    if explicit is None and not isinstance(entry, dict):  # no project asked for: the one login for this URL
        matching = [(p, e) for p, e in projects.items() if isinstance(e, dict) and _same(e.get("url"), url)]
        if len(matching) == 1:
            wanted, entry = matching[0]
    if not isinstance(entry, dict) or not entry.get("token"):
        raise A44Error(E_NOT_LOGGED_IN, f"no stored login for project {wanted} at {url}",
                       hint=f"a44 auth login --project {wanted} --url {url} --token T (or set A44_API_TOKEN)")
    if not _same(entry.get("url"), url):
        raise A44Error(E_NOT_LOGGED_IN, f"the stored login of {wanted} is for {entry.get('url')}, not {url}",
                       hint=f"a44 auth login --project {wanted} --url {url} --token T (a token is only sent to "
                            "the server it was stored for)")
    return Target("remote", wanted, reason, url, entry["token"], str(credentials_path(home)))


def _same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and a.rstrip("/") == b.rstrip("/")


def select_target(settings: Settings, project: str | None = None, *, remote: str | bool | None = None,
                  local: bool = False) -> Target:
    """The rule of the module docstring. `remote`: True for `--remote`, a URL for `--api-url URL`; `settings`: the
    environment the edge read."""
    home = a44_home(settings.home)

    def local_target(reason: str) -> Target:
        return Target("local", (_env_project(project, settings) or DEFAULT_PROJECT), reason,
                      database_url=settings.database_url)

    if local and remote:
        raise InvalidArgument("--local and --remote exclude each other")
    if local:
        return local_target("--local")
    if remote:
        if isinstance(remote, str):
            return _remote(settings, remote, project, "--api-url")
        url = settings.api_url
        if url:
            return _remote(settings, url, project, "--remote, URL from A44_API_URL")
        wanted = _env_project(project, settings)
        entry = load_credentials(home).get("projects", {}).get(wanted) if wanted else None
        if entry is None and wanted is None:
            found = default_login(home)
            if found is None:
                entries = [(p, e) for p, e in load_credentials(home).get("projects", {}).items()
                           if isinstance(e, dict)]
                found = entries[0] if len(entries) == 1 else None
            if found is not None:
                wanted, entry = found
        if not isinstance(entry, dict) or not entry.get("url"):
            shown = wanted or DEFAULT_PROJECT
            raise A44Error(E_NOT_LOGGED_IN, f"--remote: no stored login for project {shown}",
                           hint=f"a44 auth login --project {shown} --url http://HOST:8044 --token T, "
                                "or pass --api-url URL")
        return _remote(settings, entry["url"], wanted, "--remote, stored login")
    api_url = settings.api_url
    if api_url:
        if settings.database_url:
            raise InvalidArgument("both A44_API_URL and A44_DATABASE_URL are set: the verb could go "
                                               "to either", hint="pass --remote or --local, or unset one of them")
        return _remote(settings, api_url, project, "A44_API_URL")
    if settings.database_url:
        return local_target("A44_DATABASE_URL")
    found = default_login(home)
    if found is not None:
        wanted = _env_project(project, settings)
        if wanted is None or wanted == found[0]:
            return replace(_remote(settings, found[1]["url"], found[0], "selected by `a44 auth login`"),
                           implicit=True)
        entry = load_credentials(home).get("projects", {}).get(wanted)
        if isinstance(entry, dict) and entry.get("url"):
            return replace(_remote(settings, entry["url"], wanted, f"the stored login of {wanted}"), implicit=True)
        raise A44Error(E_NOT_LOGGED_IN, f"project {wanted} has no stored login; the selected login is "
                                        f"{found[0]} at {found[1]['url']}",
                       hint=f"a44 auth login --project {wanted}, or --local to use the database")
    return replace(local_target("no login selected"), implicit=True)
