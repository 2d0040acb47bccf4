"""Secrets (§17): the source connectors ask during an attempt (source.py), the encrypted secret file under
`$A44_HOME` (file.py) and its cipher (cipher.py)."""
