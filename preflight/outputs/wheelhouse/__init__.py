"""A verified wheelhouse for offline installs: every wheel of a lock, for another machine.

:func:`build` runs on a connected machine. It reads a ``requirements.lock`` (``--hash`` lines) or
a ``pylock.toml`` (PEP 751), leaves out what the target already has (``--omit NAME=REASON``,
``--exclude-installed``; each reason goes into the manifest), asks pip which file it would take
for every pin on the *target* interpreter and platform (``pip install --dry-run --no-deps
--python-version --platform --implementation cp --report``: metadata only), names the pins that
only have a source distribution there *before* anything is downloaded (or builds them with
``pip wheel`` when the target is this machine's Python and platform), downloads the wheels with
``pip download --no-deps --require-hashes`` into a cache (``~/.cache/verl-preflight/wheelhouse``)
and checks each file's sha256 against the lock. The result is a PEP 503 "simple" directory
(``simple/<name>/<file>`` with ``index.html`` pages), ``wheelhouse.json`` (name, version,
sha256, size and the lock line each wheel serves), ``requirements.lock`` (what is served, with
the sha256 of each served file) and the checker zipapp.

:func:`split` cuts the wheelhouse into parts of at most N bytes (one uncompressed tar, cut; wheels
are compressed already) with ``wheelhouse.parts.json``; :func:`open_wheelhouse` reassembles
parts, checks every part and every wheel, and names any missing or corrupt file before anything
is installed. :func:`check_complete` answers whether a wheelhouse is complete for an
interpreter: pip resolves offline against it (the verdict), and the wheels' own metadata names
each missing package's requirer.

Nothing here resolves versions: pip does. Wheel metadata is read with :mod:`packaging`.

Modules, one concept each: :mod:`.files` (names, bounded reads, hashes, writes), :mod:`.pins` (the
lock's pins and which are carried), :mod:`.pip` (pip on the target's tags), :mod:`.ownership` (which
files an earlier build wrote), :mod:`.build`, :mod:`.parts` (split and reassemble),
:mod:`.manifest` (verify and open) and :mod:`.complete` (complete for an interpreter?).
"""

from .build import CACHE, DEFAULT_PLATFORMS, build, check_pyz
from .complete import check_complete, missing_requirements, wheel_requires
from .files import MANIFEST, PARTS_MANIFEST, SERVED_LOCK
from .manifest import find_links, open_wheelhouse, verify
from .parts import parse_size, reassemble, split
from .pins import LockEntry, installed_versions, plan, read_lock

__all__ = ["LockEntry", "read_lock", "parse_size", "build", "split", "open_wheelhouse", "verify",
           "check_complete", "find_links", "missing_requirements", "installed_versions", "plan", "MANIFEST",
           "PARTS_MANIFEST", "SERVED_LOCK", "DEFAULT_PLATFORMS", "CACHE", "check_pyz", "reassemble", "wheel_requires"]
