"""A wheel's METADATA read by HTTP range requests (its zip directory and METADATA sit in the
file's last MiB), or from a bounded whole download where the host refuses ranges; and the urllib
opener whose redirects go only from https to https on hosts the index named. Used by
:mod:`preflight.proof_index`."""

import io
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from typing import Any, Dict, List, Optional, Tuple

from .atomic import open_new

__all__ = ["wheel_metadata", "opener", "TAIL", "BLOCK", "WHOLE_DEFAULT", "WHOLE_MAX", "METADATA_MAX"]

#: Bytes read from a wheel's end first (the zip directory; METADATA is among the last members).
TAIL = 1 << 20
#: Bytes of one further range read.
BLOCK = 1 << 18
#: Bytes a whole-file download (a host that refuses ranges) may take: the wheel's ``size`` as the
#: page states it (PEP 700), else :data:`WHOLE_DEFAULT`; never more than :data:`WHOLE_MAX`.
WHOLE_DEFAULT = 256 << 20
WHOLE_MAX = 2 << 30
#: Bytes a METADATA file may hold (uncompressed; a real one is a few KiB to a few hundred).
METADATA_MAX = 16 << 20

class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only from https to https on a host in ``allowed`` (the upstream's own
    host and the hosts its pages named); any other is refused as an HTTP error, unread."""

    def __init__(self, allowed: Any) -> None:
        super().__init__()
        self.allowed = allowed

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl))
        if not (old.scheme == new.scheme == "https" and new.netloc in self.allowed()):
            raise urllib.error.HTTPError(req.full_url, code, "redirect to %s://%s refused (only https to a host the "
                                         "index named is followed)" % (new.scheme, new.netloc), headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def opener(allowed: Any) -> urllib.request.OpenerDirector:
    """A urllib opener whose redirects are limited as :class:`_Redirects` says; ``allowed``: a
    callable returning the set of host[:port] names a redirect may reach."""
    return urllib.request.build_opener(_Redirects(allowed))


_PLAIN = opener(lambda: set())


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests, with the bytes
    already read kept in memory (a wheel's tail and a few blocks: at most a few MiB). ``first``:
    the (start, bytes, size) of the tail already read."""

    def __init__(self, url: str, timeout: float, stats: Dict[str, int], first: Tuple[int, bytes, int],
                 opener: urllib.request.OpenerDirector) -> None:
        super().__init__()
        self.url, self.timeout, self.stats, self.opener = url, timeout, stats, opener
        self.pos = 0
        self.spans: List[Tuple[int, bytes]] = [(first[0], first[1])]
        self.size = first[2]

    def _get(self, lo: int, hi: int) -> Tuple[int, bytes, int]:
        req = urllib.request.Request(self.url, headers={"Range": "bytes=%d-%d" % (lo, hi), "Accept-Encoding": "identity"})
        with self.opener.open(req, timeout=self.timeout) as resp:
            got = _ranged(resp, hi - lo + 1)
            if got is None:
                raise OSError("%s answered a range request with HTTP %s" % (self.url, resp.status))
        self.stats["requests"] += 1
        self.stats["bytes"] += len(got[1])
        return got

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def _have(self, lo: int, hi: int) -> Optional[bytes]:
        for start, data in self.spans:
            if start <= lo and hi <= start + len(data):
                return data[lo - start:hi - start]
        return None

    def read(self, n: int = -1) -> bytes:
        hi = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        lo = self.pos
        if lo >= hi:
            return b""
        got = self._have(lo, hi)
        if got is None:
            end = min(self.size, max(hi, lo + BLOCK)) - 1
            start, data, _ = self._get(lo, end)
            self.spans.append((start, data))
            got = data[lo - start:hi - start]
        self.pos = hi
        return got

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def _metadata_member(zf: zipfile.ZipFile, filename: str) -> str:
    """The name of the wheel's ``<name>-<version>.dist-info/METADATA`` member."""
    tops = [n for n in zf.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", n)]
    if not tops:
        raise ValueError("%s has no .dist-info/METADATA" % filename)
    stem = "-".join(filename.split("-")[:2]).lower()
    pick = next((n for n in tops if n.split(".dist-info/")[0].lower() == stem), tops[0])
    if zf.getinfo(pick).file_size > METADATA_MAX:
        raise ValueError("%s: %s is over %d bytes" % (filename, pick, METADATA_MAX))
    return pick


def _ranged(resp: Any, cap: int) -> Optional[Tuple[int, bytes, int]]:
    """(start, bytes, file size) of an HTTP 206 answer of at most ``cap`` bytes (the range asked;
    more is an OSError, unread); None (body unread) for any other answer."""
    m = re.match(r"bytes (\d+)-(\d+)/(\d+)", resp.headers.get("Content-Range", "") or "")
    if resp.status != 206 or not m:
        return None
    body = resp.read(cap + 1)
    if len(body) > cap:
        raise OSError("%s answered a range of %d bytes with more" % (resp.geturl(), cap))
    return int(m.group(1)), body, int(m.group(3))


def wheel_metadata(url: str, timeout: float = 60.0, stats: Optional[Dict[str, int]] = None,
                   max_bytes: int = WHOLE_DEFAULT, opener: Optional[urllib.request.OpenerDirector] = None) -> bytes:
    """The METADATA file of the wheel at ``url``, read by HTTP range requests: the last
    :data:`TAIL` bytes first, then :data:`BLOCK`-sized reads where the zip directory or METADATA
    lie before them. Where the host answers the first range with the whole file (HTTP 200), that
    answer (at most ``max_bytes``, capped at :data:`WHOLE_MAX`) is streamed to a file in a new
    private directory, read and deleted. ``opener``: follows redirects (default: none). Raises
    OSError (also for an answer over the bound) / ValueError / zipfile.BadZipFile when the wheel
    cannot be read."""
    stats = stats if stats is not None else {"requests": 0, "bytes": 0}
    op = opener or _PLAIN
    limit = max(0, min(int(max_bytes), WHOLE_MAX))
    filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
    req = urllib.request.Request(url, headers={"Range": "bytes=-%d" % TAIL, "Accept-Encoding": "identity"})
    with op.open(req, timeout=timeout) as resp:
        stats["requests"] += 1
        first = _ranged(resp, TAIL)
        if first is not None:
            stats["bytes"] += len(first[1])
            with zipfile.ZipFile(_RangeFile(url, timeout, stats, first, op)) as zf:  # type: ignore[arg-type]
                return zf.read(_metadata_member(zf, filename))
        length = resp.headers.get("Content-Length")
        if length and length.isdigit() and int(length) > limit:
            raise OSError("%s is %s bytes, over the %d this index downloads whole" % (url, length, limit))
        tmp = tempfile.mkdtemp(prefix="preflight-wheel-")
        path = os.path.join(tmp, "wheel")
        try:
            fd = open_new(path)
            got = 0
            try:
                while True:
                    block = resp.read(1 << 20)
                    if not block:
                        break
                    got += len(block)
                    if got > limit:
                        raise OSError("%s sent more than the %d bytes this index downloads whole" % (url, limit))
                    os.write(fd, block)
            finally:
                os.close(fd)
            stats["bytes"] += got
            with open(path, "rb") as fh, zipfile.ZipFile(fh) as zf:
                return zf.read(_metadata_member(zf, filename))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # this run's own mkdtemp directory


#: The archive suffixes of an sdist (PEP 625: .tar.gz; older ones .zip, .tar.bz2...).
