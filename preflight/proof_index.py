"""A loopback package index in front of PyPI that serves every wheel's core metadata (PEP 658,
PEP 714), so that pip's resolver proves a stack without downloading whole wheels.

Why: pip's ``install --dry-run --report`` reads a candidate's dependencies from the index's
``<wheel>.metadata`` file when the index announces one (``core-metadata`` in the PEP 691 JSON);
otherwise it downloads the whole wheel into ``$TMPDIR/pip-unpack-*`` (torch, vLLM and the
``nvidia-*`` wheels: 7.3 GB for verl 0.2's core stack alone, measured on this project's index,
which announces no metadata). ``--use-feature=fast-deps`` reads the wheel's zip directory by HTTP
range requests instead, but in about 8 small requests per wheel with nothing cached, so a stack
still costs minutes.

This index answers pip with:

* ``GET /simple/<project>/``: the upstream PEP 691 JSON page, each wheel's ``url`` pointing here
  and ``core-metadata: true`` added; every other field (hashes, requires-python, yanked,
  upload-time) as the index gave it. Pages are kept on disk ``page_ttl`` seconds.
* ``GET /files/<host>/<path>.metadata``: the wheel's own ``*.dist-info/METADATA``, read once by
  range requests (the wheel's tail first: its zip directory, and usually METADATA itself, sit in
  the last MiB), and kept on disk forever under the URL (files.pythonhosted.org paths hold the
  file's hash, so a path names one immutable file). Where the host refuses ranges the wheel is
  downloaded to a temporary file and deleted once METADATA is read.
* ``GET /files/<host>/<path>``: a redirect to the wheel itself (pip never needs it in a dry run).

pip's resolver, finder and tag checks are untouched: the proof is still pip's answer about the
upstream index; only where pip reads METADATA from changes. Stdlib only; serves 127.0.0.1 only.

On a node shared with other users (the tool often runs as root): every path above sits under a
random per-run token (``/TOKEN/simple/...``; anything else is 404 before anything is read or
fetched), and pip gets the URL in its environment, never on its command line; only wheel URLs an
upstream page named are fetched, a whole download is bounded by the size the page states, and
redirects are followed only from https to https on a host the index named. The cache directory
is used only while it is the invoker's own (:func:`cache_problem`, checked each run), else a
private one for the run; its files are written through :mod:`preflight.atomic` and pruned
without following links.
"""

import hashlib
import hmac
import json
import os
import queue
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from packaging.version import InvalidVersion, Version

from .atomic import OutputError, make_dirs, run_problem, tree_problem, write_atomic
from .wheel_metadata import BLOCK, METADATA_MAX, TAIL, WHOLE_DEFAULT, WHOLE_MAX, opener, wheel_metadata  # noqa: F401

__all__ = ["MetadataIndex", "SDIST_SUFFIXES", "sdist_version", "cache_problem", "default_cache_dir", "opener", "prune", "wheel_metadata"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
#: Final releases per page whose wheels' METADATA is read ahead of pip's request (the newest: pip asks for it
#: first; with 2, 515 reads for the 337 pip made on verl 0.2's core line), and the
#: threads that read them.
PREFETCH = 1
WORKERS = 6
#: Bytes of one cached file read back (pages of torch's thousands of files are a few MiB).
CACHED_MAX = 64 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/verl-preflight/proof-index`` (else ``~/.cache/...``): where pages and
    wheel metadata are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "verl-preflight", "proof-index")


SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar")


def _is_sdist(filename: str) -> bool:
    return filename.lower().endswith(SDIST_SUFFIXES)


def sdist_version(filename: str) -> str:
    """The version part of sdist ``filename`` (``name-1.0.tar.gz`` -> "1.0"; "" when none)."""
    stem = filename
    for suf in SDIST_SUFFIXES:
        if stem.lower().endswith(suf):
            stem = stem[:-len(suf)]
            break
    return stem.rsplit("-", 1)[1] if "-" in stem else ""


def _norm(path: str) -> str:
    return urllib.parse.quote(urllib.parse.unquote(path.lstrip("/")), safe="/+~")


def cache_problem(cache_dir: str) -> Optional[str]:
    """Why ``cache_dir`` may not be trusted as this run's own cache (a phrase), or None: it (made
    when missing) must be owned by the invoking user or root and writable by no other user, every
    directory and link on its way owned by the invoking user or root and not writable by others
    (a sticky directory such as /tmp on the way is fine), as for the wheelhouse cache
    (``atomic.tree_problem``, ``atomic.run_problem``)."""
    try:
        make_dirs(cache_dir, "the proof-index cache")
    except OutputError as exc:
        return str(exc)
    return run_problem(cache_dir) or tree_problem(cache_dir, ("pages", "metadata"))


def _read_own(path: str, limit: int = CACHED_MAX) -> Optional[Tuple[bytes, float]]:
    """(bytes, mtime) of the regular file ``path`` when it is the invoking user's or root's (opened
    without following a link at the name); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, os.geteuid()) or st.st_size > limit:
            return None
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks), st.st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)


def _write(path: str, data: bytes) -> None:
    """Keep ``data`` at ``path`` through the one writer (a refused place is left unwritten: the
    cache is an optimisation)."""
    try:
        write_atomic(path, data, "the proof-index cache", mode=0o644, create_dirs=True)
    except OutputError:
        pass


def _prune_walk(cache_dir: str) -> List[Tuple[float, int, Tuple[int, int], str, str]]:
    """(mtime, size, (st_dev, st_ino), directory relative to ``cache_dir``, name) of each regular
    file under it; links are never followed (``os.fwalk(follow_symlinks=False)``)."""
    files = []
    for d, _, names, dfd in os.fwalk(cache_dir, follow_symlinks=False):
        for n in names:
            try:
                st = os.stat(n, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((st.st_mtime, st.st_size, (st.st_dev, st.st_ino), os.path.relpath(d, cache_dir), n))
    return files


def prune(cache_dir: str, max_bytes: int = 256 << 20) -> int:
    """Delete the least recently written files under ``cache_dir`` until it holds at most
    ``max_bytes``; returns the bytes freed. Never follows a link: the walk is ``os.fwalk`` without
    links, and each file is removed by ``unlinkat`` in its directory's descriptor from a second
    such walk, only while it is still the very file the first walk measured (st_dev, st_ino). A
    ``cache_dir`` that is not this user's own (:func:`cache_problem`) is left alone (0)."""
    if tree_problem(cache_dir) or not os.path.isdir(cache_dir) or os.path.islink(cache_dir):
        return 0
    files = _prune_walk(cache_dir)
    total = sum(f[1] for f in files)
    doomed: Dict[Tuple[str, str], Tuple[Tuple[int, int], int]] = {}
    left = total
    for _, size, ident, d, n in sorted(files):
        if left <= max_bytes:
            break
        doomed[(d, n)] = (ident, size)
        left -= size
    freed = 0
    if not doomed:
        return 0
    for d, _, names, dfd in os.fwalk(cache_dir, follow_symlinks=False):
        rel = os.path.relpath(d, cache_dir)
        for n in names:
            want = doomed.get((rel, n))
            if want is None:
                continue
            try:
                st = os.stat(n, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == want[0]:
                    os.unlink(n, dir_fd=dfd)
                    freed += want[1]
            except OSError:
                pass
    return freed


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True
    index: "MetadataIndex"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up; upstream failures are answered 502 and kept in index.errors


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    #: Seconds a connection may sit idle before its handler thread gives up (another local user's
    #: half-open requests would otherwise hold threads in the tool's process until it exits).
    timeout = 30.0

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        ix = self.server.index
        path = urllib.parse.urlsplit(self.path).path
        token, _, path = path.lstrip("/").partition("/")
        path = "/" + path
        if not hmac.compare_digest(token.encode("utf-8", "replace"), ix.token.encode("ascii")):
            return self._send(404, b"not found", "text/plain")  # not this run's pip: nothing is read or fetched
        try:
            if path.startswith("/simple/"):
                body = ix.page(path[len("/simple/"):].strip("/"))
                if body is None:
                    return self._send(404, b"not found", "text/plain")
                return self._send(200, body, JSON_TYPE)
            if path.startswith("/files/"):
                host, _, rest = path[len("/files/"):].partition("/")
                host, rest = urllib.parse.unquote(host), urllib.parse.quote(urllib.parse.unquote(rest), safe="/+~")
                if path.endswith(".whl.metadata"):
                    if ix.known(host, rest[:-len(".metadata")]) is None:
                        return self._send(404, b"not found", "text/plain")
                    return self._send(200, ix.metadata(host, rest[:-len(".metadata")]), "text/plain")
                url = ix.known(host, rest)
                if url is not None:
                    self.send_response(302)
                    self.send_header("Location", url)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
            return self._send(404, b"not found", "text/plain")
        except Exception as exc:  # the upstream's failure: pip reports the status and stops
            ix.errors.append("%s: %s: %s" % (path, type(exc).__name__, exc))
            return self._send(502, ("%s: %s" % (type(exc).__name__, exc)).encode("utf-8", "replace"), "text/plain")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # pip went away (killed at its deadline): nobody to answer
            pass


class MetadataIndex:
    """The loopback index (see the module doc), as a context manager::

        with MetadataIndex() as ix:
            env["PIP_INDEX_URL"] = ix.url; pip ...   # the URL holds the run's secret: never on argv

    ``upstream``: the PEP 691 index (PyPI's simple API); ``cache_dir``: where pages and metadata
    are kept (default :func:`default_cache_dir`; pruned to ``max_bytes`` on exit); ``page_ttl``:
    seconds a project page read from the upstream stays valid; ``timeout``: seconds for one
    upstream request. With ``python`` (X.Y) and ``platforms`` (the tags pip is given) a page
    holds only the wheels :meth:`may_fit` admits, and sdists only with ``sdists`` (a resolver run
    that may build one: a lock under the target's own interpreter). ``stats`` counts pages and metadata read
    upstream or from the cache, upstream requests and bytes, files left out; ``errors`` holds
    upstream failures, one line each; ``notes`` what the run should say once (a private cache).

    Who may use it: every path starts with a random per-run token (``url`` is
    ``http://127.0.0.1:PORT/TOKEN/simple``); anything else is 404 before anything is read,
    fetched or written. Only wheel URLs an upstream page named are fetched, redirects only from
    https to https on the upstream's or a named host (:class:`_Redirects`). The cache is used only
    while :func:`cache_problem` finds nothing (checked each run); otherwise this run reads and
    writes a private directory removed on exit."""

    def __init__(self, upstream: str = "https://pypi.org/simple", cache_dir: Optional[str] = None,
                 page_ttl: float = 600.0, timeout: float = 60.0, max_bytes: int = 256 << 20,
                 python: Optional[str] = None, platforms: Sequence[str] = (), sdists: bool = False) -> None:
        self.upstream = upstream.rstrip("/")
        self.python, self.platforms, self.sdists = python, set(platforms), sdists
        self.cache_dir = cache_dir or default_cache_dir()
        self.token = secrets.token_urlsafe(24)
        self.notes: List[str] = []
        self._private: Optional[str] = None
        self._urls: Dict[Tuple[str, str], Tuple[str, Optional[int]]] = {}  # (host, path) -> (url, size)
        self._sizes: Dict[str, Optional[int]] = {}
        self._opener = opener(self._allowed)
        self.page_ttl, self.timeout, self.max_bytes = page_ttl, timeout, max_bytes
        self.hosts: Dict[str, str] = {}  # host -> scheme, as the upstream pages name them
        self.errors: List[str] = []
        self.stats: Dict[str, int] = {"pages": 0, "pages_cached": 0, "metadata": 0, "metadata_cached": 0,
                                      "requests": 0, "bytes": 0, "files_left_out": 0}
        self._lock = threading.Lock()
        self._inflight: Dict[str, threading.Event] = {}  # queued or being read ahead
        self._running: Set[str] = set()  # being read ahead now
        self._queue: "queue.Queue[Optional[str]]" = queue.Queue()
        self._queue_on = False
        self._server: Optional[_Server] = None
        self.url = ""
        #: Normalized projects whose sdists the pages keep (a native ``--no-binary NAME`` run).
        self.sdist_projects: Set[str] = set()

    def _allowed(self) -> Set[str]:
        with self._lock:
            return set(self.hosts) | {urllib.parse.urlsplit(self.upstream).netloc}

    def known(self, host: str, path: str) -> Optional[str]:
        """The upstream URL of the wheel a page named as ``host`` and ``path`` (quoted), or None."""
        with self._lock:
            got = self._urls.get((host, _norm(path)))
        return got[0] if got else None

    def _use_cache(self) -> None:
        why = cache_problem(self.cache_dir)
        if why:
            self._private = tempfile.mkdtemp(prefix="preflight-proof-index-")
            self.notes.append("the proof-index cache %s is not this user's own (%s): this run used a private "
                              "cache, removed at its end" % (self.cache_dir, why))
            self.cache_dir = self._private

    def __enter__(self) -> "MetadataIndex":
        self._use_cache()
        self._queue_on = True
        for i in range(WORKERS):
            threading.Thread(target=self._worker, name="proof-index-%d" % i, daemon=True).start()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.index = self
        threading.Thread(target=self._server.serve_forever, name="proof-index", daemon=True).start()
        self.url = "http://127.0.0.1:%d/%s/simple" % (self._server.server_address[1], self.token)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._queue_on = False  # queued prefetches are dropped; one under way ends with its request
        for _ in range(WORKERS):
            self._queue.put(None)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)  # this run's own mkdtemp directory
            return
        try:
            prune(self.cache_dir, self.max_bytes)
        except OSError:
            pass

    def _cache(self, kind: str, key: str) -> str:
        h = hashlib.sha256(key.encode("utf-8")).hexdigest()
        return os.path.join(self.cache_dir, kind, h[:2], h)

    def _raw_page(self, name: str) -> Optional[bytes]:
        """The upstream PEP 691 page of the normalized project ``name`` as the index gave it
        (cached ``page_ttl`` s), None when the upstream has no such project."""
        path = self._cache("pages", "%s/%s" % (self.upstream, name))
        raw: Optional[bytes] = None
        got = _read_own(path)
        if got is not None and time.time() - got[1] < self.page_ttl:
            raw = got[0]
            self.stats["pages_cached"] += 1
        if raw is None:
            req = urllib.request.Request("%s/%s/" % (self.upstream, name), headers={"Accept": JSON_TYPE})
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    raw = resp.read(CACHED_MAX + 1)
                if len(raw) > CACHED_MAX:
                    raise OSError("the page of %s is over %d bytes" % (name, CACHED_MAX))
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                raise
            self.stats["pages"] += 1
            self.stats["requests"] += 1
            self.stats["bytes"] += len(raw)
            _write(path, raw)
        return raw

    def _name(self, base: str, f: Dict[str, Any]) -> Optional[str]:
        """Register file ``f`` of a page (its absolute URL and size) as one this index may fetch;
        its upstream URL, or None for a URL that is not http(s)."""
        u = urllib.parse.urlsplit(urllib.parse.urljoin(base, f["url"]))
        if u.scheme not in ("http", "https") or not u.netloc:
            return None
        size = f.get("size") if isinstance(f.get("size"), int) else None
        url = urllib.parse.urlunsplit(u[:3] + ("", ""))
        with self._lock:
            self.hosts[u.netloc] = u.scheme
            self._sizes[url] = size
            self._urls[(u.netloc, _norm(u.path))] = (url, size)
        return url

    def page(self, project: str) -> Optional[bytes]:
        """The rewritten PEP 691 page of ``project`` (None when the upstream has no such project).
        Its sdists are kept only for a project in :attr:`sdist_projects` (a ``--no-binary`` run)."""
        name = re.sub(r"[-_.]+", "-", project).lower()
        raw = self._raw_page(name)
        if raw is None:
            return None
        doc = json.loads(raw.decode("utf-8"))
        base = "%s/%s/" % (self.upstream, name)
        sdists = name in self.sdist_projects
        if self.python and self.platforms:
            keep = [f for f in doc.get("files", []) if self.may_fit(f.get("filename", "")) or (
                sdists and _is_sdist(f.get("filename", "")))]
            self.stats["files_left_out"] += len(doc.get("files", [])) - len(keep)
            doc["files"] = keep
        for f in doc.get("files", []):
            wheel = f.get("filename", "").endswith(".whl")
            if not (wheel or (sdists and _is_sdist(f.get("filename", "")))) or self._name(base, f) is None:
                continue
            u = urllib.parse.urlsplit(urllib.parse.urljoin(base, f["url"]))
            f["url"] = "/%s/files/%s%s" % (self.token, u.netloc, u.path)
            if wheel:
                f["core-metadata"] = f["dist-info-metadata"] = True
        self._prefetch([f for f in doc.get("files", []) if f.get("filename", "").endswith(".whl")])
        return json.dumps(doc).encode("utf-8")

    def sdist_files(self, project: str) -> List[Dict[str, Any]]:
        """The sdists the upstream page of ``project`` lists, not yanked: dicts with
        ``filename``, ``version`` (as the filename gives it), ``url`` (upstream) and ``size``
        (bytes, None when the page states none); each becomes a URL :meth:`download` may fetch.
        Raises OSError when the page cannot be read."""
        name = re.sub(r"[-_.]+", "-", project).lower()
        raw = self._raw_page(name)
        if raw is None:
            return []
        base = "%s/%s/" % (self.upstream, name)
        out = []
        for f in json.loads(raw.decode("utf-8")).get("files", []):
            fn = f.get("filename", "")
            if not _is_sdist(fn) or f.get("yanked"):
                continue
            url = self._name(base, f)
            if url is not None:
                out.append({"filename": fn, "version": sdist_version(fn), "url": url,
                            "size": f.get("size") if isinstance(f.get("size"), int) else None})
        return out

    def wheel_files(self, project: str) -> List[str]:
        """The filenames of the wheels the upstream page of ``project`` lists, not yanked (every
        platform). Raises OSError when the page cannot be read."""
        raw = self._raw_page(re.sub(r"[-_.]+", "-", project).lower())
        if raw is None:
            return []
        return [f.get("filename", "") for f in json.loads(raw.decode("utf-8")).get("files", [])
                if f.get("filename", "").endswith(".whl") and not f.get("yanked")]

    def download(self, url: str, cap: int) -> bytes:
        """The whole file at ``url`` (one a page named: :meth:`sdist_files`), in memory: at most
        ``cap`` bytes and never more than the page states, read within this index's
        ``timeout`` per request. Raises OSError (over the bound, the upstream failing) or
        ValueError (a URL no page named)."""
        u = urllib.parse.urlsplit(url)
        if self.known(u.netloc, u.path) is None:
            raise ValueError("%s was named by no index page" % url)
        with self._lock:
            size = self._sizes.get(url)
        limit = min(cap, size) if size is not None else cap
        if size is not None and size > cap:
            raise OSError("%s is %d bytes, over the %d read" % (url, size, cap))
        with self._opener.open(urllib.request.Request(url, headers={"Accept-Encoding": "identity"}),
                               timeout=self.timeout) as resp:
            data = resp.read(limit + 1)
        self.stats["requests"] += 1
        self.stats["bytes"] += len(data)
        if len(data) > limit:
            raise OSError("%s sent more than the %d bytes %s" % (url, limit, "the page states" if size is not None
                                                                  and size <= cap else "read"))
        return data

    def may_fit(self, filename: str) -> bool:
        """Whether pip could take wheel ``filename`` for the target (``python``, ``platforms``), as
        a superset of pip's own tag check: some tag of the wheel has platform ``any`` or one of
        ``platforms``, a ``py*`` or ``cp*`` interpreter and abi ``none``, ``abi3`` or the target's
        ``cpXY``. Files pip rejects anyway (other platforms, PyPy, other CPython ABIs; sdists,
        which --only-binary=:all: excludes) are left out of the page, so pip's finder parses a
        fraction of torch's thousands of links; a name that does not parse is kept."""
        if not filename.endswith(".whl"):
            return self.sdists
        parts = filename[:-4].split("-")
        if len(parts) not in (5, 6):
            return True
        abi_own = "cp" + str(self.python).replace(".", "")
        for interp in parts[-3].split("."):
            for abi in parts[-2].split("."):
                for plat in parts[-1].split("."):
                    if (plat == "any" or plat in self.platforms) and interp.startswith(("py", "cp")) and \
                            abi in ("none", "abi3", abi_own):
                        return True
        return False

    def metadata(self, host: str, path: str) -> bytes:
        """METADATA of the wheel ``https://host/path`` (the scheme the page named): from the
        cache, else read by range requests (waiting only for a read-ahead of the same wheel
        already under way; one merely queued is taken over). Raises ValueError for a host no page named, OSError when the upstream fails."""
        url = self.known(host, path)
        if url is None:
            raise ValueError("%s/%s was named by no index page" % (host, path))
        data = self._cached(url)
        if data is not None:
            return data
        with self._lock:
            ev = self._inflight.get(url)
            running = url in self._running
            if ev is not None and not running:
                self._inflight.pop(url)  # queued only: pip's request reads it now, the worker skips it
                ev.set()
        if running and ev is not None and ev.wait(self.timeout):
            data = self._cached(url)
            if data is not None:
                return data
        return self._fetch(url)

    def _cached(self, url: str) -> Optional[bytes]:
        cached = self._cache("metadata", url)
        got = _read_own(cached)
        if got is None:
            return None
        self.stats["metadata_cached"] += 1
        try:
            os.utime(cached, follow_symlinks=False)  # recently used: kept by prune
        except (OSError, NotImplementedError):
            pass
        return got[0]

    def _fetch(self, url: str) -> bytes:
        with self._lock:
            size = self._sizes.get(url)
        data = wheel_metadata(url, self.timeout, self.stats, size if size is not None else WHOLE_DEFAULT,
                              self._opener)
        self.stats["metadata"] += 1
        _write(self._cache("metadata", url), data)
        return data

    def _prefetch(self, files: List[Dict[str, Any]]) -> None:
        """Queue the METADATA of the wheels of the :data:`PREFETCH` newest final releases on a
        page (pip asks for the newest first), to be read by :data:`WORKERS` threads while pip
        works: the upstream's latency overlaps instead of adding up."""
        if not self._queue_on:
            return
        by: Dict[Any, List[str]] = {}
        for f in files:
            if f.get("yanked") or not f["url"].startswith("/%s/files/" % self.token):
                continue
            parts = f["filename"][:-4].split("-")
            try:
                v = Version(parts[1])
            except (InvalidVersion, IndexError):
                continue
            if not v.is_prerelease:
                by.setdefault(v, []).append(f["url"])
        for v in sorted(by, reverse=True)[:PREFETCH]:
            for local in by[v]:
                host, _, rest = local[len("/%s/files/" % self.token):].partition("/")
                url = self.known(host, rest)
                if url is None:
                    continue
                with self._lock:
                    if url in self._inflight or os.path.exists(self._cache("metadata", url)):
                        continue
                    self._inflight[url] = threading.Event()
                self._queue.put(url)

    def _worker(self) -> None:
        while True:
            url = self._queue.get()
            if url is None:
                return
            with self._lock:
                if url not in self._inflight or not self._queue_on:
                    continue  # taken by pip's own request meanwhile, or the index is closing
                self._running.add(url)
            try:
                if not os.path.exists(self._cache("metadata", url)):
                    self._fetch(url)
            except Exception:  # pip's own request for it reads it again and reports the failure
                pass
            finally:
                with self._lock:
                    self._running.discard(url)
                    ev = self._inflight.pop(url, None)
                if ev is not None:
                    ev.set()
