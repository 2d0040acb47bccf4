"""The encrypted secret file `$A44_HOME/secrets.json` as `a44 automation secrets` manages it (runtime/secrets):
which file and key the settings name, what a secret id looks like, and a new key read from text."""

from __future__ import annotations

from ..runtime.secrets.cipher import parse_key
from ..runtime.secrets.file import SECRET_REF, SecretFile
from ..settings import Settings


def secret_file(settings: Settings) -> SecretFile:
    """The file and key of `settings`: `set`, `names`, `remove`, `rotate_key`; `path`, `key_path`."""
    return SecretFile.of(settings)


def is_secret_id(name: str) -> bool:
    """`sec_` followed by letters, digits or _: the ids connectors reference."""
    return bool(SECRET_REF.match(name))


def read_key(text: str, origin: str) -> bytes:
    """A key from its hex text; E_SECRET_KEY_SHORT naming `origin` (a file, stdin) when it is not hex or short."""
    return parse_key(text, origin)
