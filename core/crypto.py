"""Secrets at rest: Fernet (cryptography) under a key from WONDA_ENCRYPTION_KEY or derived from SECRET_KEY.

`EncryptedTextField` keeps the plain value in Python and a Fernet token in the column. Key rotation:
values are encrypted with the first key and decrypted with any of

1. WONDA_ENCRYPTION_KEY when set, else the key derived from SECRET_KEY;
2. each entry of WONDA_ENCRYPTION_OLD_KEYS (a former Fernet key, passphrase or SECRET_KEY);
3. the SECRET_KEY-derived key when WONDA_ENCRYPTION_KEY is set, so setting it later keeps old rows readable.

A value no key opens (SECRET_KEY changed and the old one is not listed) reads as an empty
`Undecryptable` string that carries a plain-words reason, so pages and workers keep working; saving
the row again keeps the token as it was, in case the former key comes back.
"""

from __future__ import annotations

import base64
import binascii
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.validators import MaxLengthValidator
from django.db import models

__all__ = ["EncryptedTextField", "Undecryptable", "decryption_error", "encrypt", "decrypt", "generate_key"]

# Fixed and named for their purpose: another use of SECRET_KEY (sessions, signing) never yields this key.
HKDF_SALT = b"wonda.crypto"
HKDF_INFO = b"wonda: Fernet key for secrets stored in the database (LLM API keys)"


def generate_key() -> str:
    """A fresh Fernet key for WONDA_ENCRYPTION_KEY."""
    return Fernet.generate_key().decode()


def _fernet_key(material: str) -> bytes:
    """A Fernet key as given (44 url-safe base64 characters of 32 bytes), else one derived with HKDF-SHA256.

    HKDF, not a password hash: SECRET_KEY and generated keys are already high-entropy. A short
    hand-typed passphrase in WONDA_ENCRYPTION_KEY would be weak; docs/configuration.md says to generate a key.
    """
    material = material.strip()
    if len(material) == 44:
        try:
            if len(base64.urlsafe_b64decode(material.encode())) == 32:
                return material.encode()
        except (binascii.Error, ValueError):
            pass
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=HKDF_SALT, info=HKDF_INFO).derive(material.encode())
    return base64.urlsafe_b64encode(derived)


@functools.lru_cache(maxsize=8)
def _multifernet(secret_key: str, encryption_key: str, old_keys: tuple[str, ...]) -> MultiFernet:
    materials = [encryption_key or secret_key, *old_keys]
    if encryption_key:
        materials.append(secret_key)
    keys = list(dict.fromkeys(_fernet_key(m) for m in materials if m))  # in order, without repeats
    return MultiFernet([Fernet(k) for k in keys])


def _keys() -> MultiFernet:
    # Read on every call (cached per value) so settings overrides in tests and a reloaded env apply.
    old = getattr(settings, "ENCRYPTION_OLD_KEYS", ()) or ()
    if isinstance(old, str):
        old = old.split(",")
    return _multifernet(settings.SECRET_KEY, getattr(settings, "ENCRYPTION_KEY", "") or "",
                        tuple(k.strip() for k in old if k.strip()))


def encrypt(plain: str) -> str:
    return _keys().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    """The plain text; raises cryptography's InvalidToken when no configured key opens it."""
    return _keys().decrypt(token.encode()).decode()


def rotate(token: str) -> str:
    """The same secret re-encrypted under the current first key."""
    return _keys().rotate(token.encode()).decode()


class Undecryptable(str):
    """An empty string standing for a stored token that no configured key opens.

    It is falsy and equal to "", so `simulation.api_key or default` and templates behave as for
    "no key"; `reason` says why in plain words, and `token` is written back unchanged on save.
    """

    def __new__(cls, *, token: str, reason: str):
        value = super().__new__(cls, "")
        value.token, value.reason = token, reason
        return value

    def __reduce__(self):
        return (_undecryptable, (self.token, self.reason))


def _undecryptable(token: str, reason: str) -> Undecryptable:
    return Undecryptable(token=token, reason=reason)


def decryption_error(value) -> str:
    """Why a value read from an encrypted field is unusable, or "" when it is fine (or simply empty)."""
    return value.reason if isinstance(value, Undecryptable) else ""


class EncryptedTextField(models.TextField):
    """Python value: the plain text. Column: a Fernet token (text; a 500-character secret takes ~770).

    Empty stays empty in the column (nothing to hide, and `api_key=""` still filters). Lookups on
    any other value cannot match: every encryption of the same text differs.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.max_length is not None:
            self.validators.append(MaxLengthValidator(self.max_length))  # of the plain text, as CharField does

    def undecryptable_reason(self) -> str:
        name = str(self.verbose_name or self.name)
        return (f"the stored {name} cannot be decrypted (the server's SECRET_KEY or WONDA_ENCRYPTION_KEY changed "
                f"since it was saved): enter the key again under the run's Model settings and Resume, or have "
                f"the administrator add the former key to WONDA_ENCRYPTION_OLD_KEYS")

    def from_db_value(self, value, expression, connection):
        if not value:
            return value
        try:
            return decrypt(value)
        except InvalidToken:
            return Undecryptable(token=value, reason=self.undecryptable_reason())

    def get_prep_value(self, value):
        if isinstance(value, Undecryptable):
            return value.token
        value = super().get_prep_value(value)
        if not value:
            return value
        return encrypt(value)

    def value_to_string(self, obj):
        # dumpdata and other serializers: a secret never leaves the database this way (pg_dump keeps tokens).
        return ""
